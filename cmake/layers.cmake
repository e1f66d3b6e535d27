# The layers of src/, lowest first, and the layers each may include (docs/architecture.md).
# CMakeLists.txt links each layer's library to exactly these; cmake/check_layering.cmake
# fails on any include outside them.
set(INFINIPIPE_LAYERS core data cost plan runlog sim options model comm ckpt obs profile runtime report cli)
set(INFINIPIPE_USES_core "")
set(INFINIPIPE_USES_data core)
set(INFINIPIPE_USES_cost core)
set(INFINIPIPE_USES_plan core cost)
set(INFINIPIPE_USES_runlog core plan)
set(INFINIPIPE_USES_sim core cost plan)
set(INFINIPIPE_USES_options core cost plan)
set(INFINIPIPE_USES_model core)
set(INFINIPIPE_USES_comm core)
set(INFINIPIPE_USES_ckpt core model)
set(INFINIPIPE_USES_obs core plan runlog)
set(INFINIPIPE_USES_profile core cost model comm obs)
set(INFINIPIPE_USES_runtime core data cost plan runlog model comm ckpt obs profile)
set(INFINIPIPE_USES_report core cost plan runlog sim)
set(INFINIPIPE_USES_cli core data cost plan runlog sim options model comm ckpt obs profile runtime report)
