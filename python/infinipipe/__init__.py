"""infinipipe: plan and train long-context LLMs with Elastic Pipeline Parallelism.

The C++ library (``infinipipe._core``) decides everything about a global batch: configuration
with Megatron-LM's option names (:class:`Config`), the plan of any schedule (:func:`plan`), its
simulation (:func:`simulate`) and the layout search (:func:`search_layout`), the online cost fit
(:class:`CostFeedback`), training data (:class:`TrainingBatches`) and checkpoints.
``infinipipe.torch`` executes plans on PyTorch (CPU with gloo, GPUs with NCCL).

Errors are :class:`Error` (a runtime failure) and its subclass :class:`ConfigError` (a usage or
configuration mistake), with the messages of the ``infinipipe`` command.
"""

from infinipipe._core import (  # noqa: F401  (the public API, documented in _core.pyi)
    Action,
    BudgetError,
    CheckpointReader,
    Chunk,
    Config,
    ConfigError,
    CostFeedback,
    CostModel,
    Error,
    IterationMetrics,
    ModelConfig,
    Plan,
    PlanResult,
    Slice,
    Stage,
    StepResult,
    TrainingBatches,
    checkpoint_commit,
    checkpoint_latest,
    checkpoint_save_shard,
    export_hf,
    hf_folder_is,
    init_params,
    plan,
    plan_forward_only,
    rank_order,
    rank_path,
    read_hf,
    reference_step,
    replica_split,
    resolve_auto_layout,
    run_train,
    train_problems,
    run_samples_message,
    schedules,
    search_layout,
    simulate,
    train_options_lenient,
)

__all__ = [
    "Action",
    "BudgetError",
    "CheckpointReader",
    "Chunk",
    "Config",
    "ConfigError",
    "CostFeedback",
    "CostModel",
    "Error",
    "IterationMetrics",
    "ModelConfig",
    "Plan",
    "PlanResult",
    "Slice",
    "Stage",
    "StepResult",
    "TrainingBatches",
    "checkpoint_commit",
    "checkpoint_latest",
    "checkpoint_save_shard",
    "export_hf",
    "hf_folder_is",
    "init_params",
    "plan",
    "plan_forward_only",
    "rank_order",
    "rank_path",
    "read_hf",
    "reference_step",
    "replica_split",
    "resolve_auto_layout",
    "run_train",
    "train_problems",
    "schedules",
    "search_layout",
    "simulate",
    "train_options_lenient",
]
__version__ = "0.1.0"
