# Every bench script's default invocation (`bash bench/<name>.sh`, no arguments) as a ctest
# (label `bench`), made cheap only through the size knobs the script itself documents (env vars):
# the same code path as the full benchmark, so a script that stops working fails CI rather than
# the next person who runs it. Output goes to the build folder, never the source tree.
#   ctest --test-dir build -L bench
# Left out, with why: gpu_check.sh (its default is --device cuda: needs a GPU; python/ runs it
# with --device cpu), gpu_bundle.sh (python/ builds it for test_gpu_bundle); torch_engine.sh and
# prediction_grid.sh run only where the configuring Python imports torch.
set(bench_out ${CMAKE_BINARY_DIR}/bench-tests)

function(infinipipe_bench_test name)
  cmake_parse_arguments(B "" "TIMEOUT;FAIL" "ENV" ${ARGN})
  add_test(NAME bench_${name}
           COMMAND bash ${CMAKE_SOURCE_DIR}/bench/${name}.sh
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # Not RUN_SERIAL: they check that the script runs, not its numbers, and CI time is two cores'
  # worth of tests side by side.
  set_tests_properties(bench_${name} PROPERTIES
    LABELS bench TIMEOUT ${B_TIMEOUT} COST 50  # started early: see python/CMakeLists.txt
    ENVIRONMENT "INFINIPIPE_BUILD_DIR=${CMAKE_BINARY_DIR};OMP_WAIT_POLICY=passive;${B_ENV}")
  if(B_FAIL)  # a script that reports a failed run as a table row and still exits 0
    set_tests_properties(bench_${name} PROPERTIES FAIL_REGULAR_EXPRESSION "${B_FAIL}")
  endif()
endfunction()

infinipipe_bench_test(generate_cache TIMEOUT 300 ENV "NEW_TOKENS=4")
infinipipe_bench_test(tokenizer_speed TIMEOUT 300 ENV "REPEAT=1;VOCAB=2000")
infinipipe_bench_test(grouping_solve TIMEOUT 300 ENV
  "INFINIPIPE_BASE_BIN=${CMAKE_BINARY_DIR}/infinipipe;MODELS=7b;LENGTHS=48k;DISTS=github;ITERATIONS=1")
infinipipe_bench_test(layout_search TIMEOUT 300 ENV "EXAMPLE=llama7b-48k;ITERS=1")
infinipipe_bench_test(paper_settings TIMEOUT 600 ENV
  "MODELS=7b;LENGTHS=48k;DISTS=github;ITERATIONS=1;OUT=${bench_out}/paper_settings")
infinipipe_bench_test(prediction_error TIMEOUT 600 ENV
  "ITERS=4;SKIP=2;DP=1;OUT=${bench_out}/prediction_error")
infinipipe_bench_test(replica_balance TIMEOUT 300 ENV "ITERATIONS=1")
# ITERS=3: the runs warm the learning rate up over 2 iterations, which must be shorter than the run.
# PROFILE_GRID=quick: the default grid's lengths to 4096 would be most of the test's time.
infinipipe_bench_test(schedules_real TIMEOUT 600 FAIL "failed \\(exit|timed out after" ENV
  "SCHEDULES=epp 1f1b;PP=2;LAYERS=2;HIDDEN=64;SEQ_LEN=512;GBS=4;ITERS=3;WARMUP=1;ROUNDS=1;DOCS=100;PROFILE_GRID=quick;OUT=${bench_out}/schedules_real")
infinipipe_bench_test(ulysses_layout TIMEOUT 300 ENV "MODELS=7b;LENGTHS=48k;DISTS=github")
if(INFINIPIPE_BUILD_BENCH)  # they run bench_model and bench_planner_grid
  infinipipe_bench_test(kernel_efficiency TIMEOUT 300 ENV "QUICK=1")
  infinipipe_bench_test(planner_latency TIMEOUT 300 ENV "QUICK=1")
endif()
# The Python of `import infinipipe` (CMakeLists.txt sets it; pybind11 finds its own Python later,
# so no find_package here).
if(INFINIPIPE_PYTHON AND PYTHON_EXECUTABLE)
  execute_process(COMMAND ${PYTHON_EXECUTABLE} -c "import torch" RESULT_VARIABLE torch_missing
                  OUTPUT_QUIET ERROR_QUIET)
  if(torch_missing EQUAL 0)
    infinipipe_bench_test(torch_engine TIMEOUT 600 ENV
      "ITERS=2;WARMUP=1;ROUNDS=1;LAYOUTS=1x1;WAIT_POLICIES=passive")
    # One cell per runtime: 11 iterations is the least past the fit's warm-up of 10.
    infinipipe_bench_test(prediction_grid TIMEOUT 600 ENV
      "ITERS=11;SEQ_LEN=512;PP=2;DP=1;BUDGETS=tight;SCHEDULES=epp;OUT=${bench_out}/prediction_grid")
  endif()
endif()
