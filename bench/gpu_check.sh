#!/usr/bin/env bash
# The GPU check, one script for the first GPU machine available (at most ~10 minutes on one
# H200, no network): builds `import infinipipe` against the PyTorch found there, then runs
# bench/gpu_check.py (the executor against the C++ engine on CUDA, bf16 EPP against 1F1B with
# tokens/s, MFU and peak memory against the plan, a GPU calibration file). Also runs on a CPU.
#
#   bash bench/gpu_check.sh                        # --device cuda, results in gpu-check/
#   bash bench/gpu_check.sh --device cpu --quick   # the same paths here
#   bash bench/gpu_check.sh --deps DIR ...         # headers and libraries unpacked from Debian
#                                                  # packages (bench/gpu_deps.sh DIR, run where
#                                                  # apt works) for a machine without them
# PYTHON (default python3) is the Python with torch; INFINIPIPE_PYTHON_DIR, else a build folder
# whose module that Python imports (build/, then build-gpu/), is reused, else build-gpu/ is
# configured and built.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
deps=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps)
      deps=$2
      if [ -f "$deps" ]; then  # DIR.tar.xz of bench/gpu_deps.sh
        mkdir -p /tmp/infinipipe-gpu-deps && tar -C /tmp/infinipipe-gpu-deps -xJf "$deps"
        deps=/tmp/infinipipe-gpu-deps/$(basename "$deps" .tar.xz)
      fi
      deps=$(cd "$deps" && pwd)
      shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -n "$deps" ]; then
  lib=$deps/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$lib:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_SYSROOT_DIR=$deps PKG_CONFIG_PATH=$lib/pkgconfig:$deps/usr/share/pkgconfig
  export CPATH=$deps/usr/include${CPATH:+:$CPATH}
fi
start=$SECONDS
module=${INFINIPIPE_PYTHON_DIR:-}
for dir in build build-gpu; do
  [ -n "$module" ] && break
  if [ -d "$dir/python" ] && PYTHONPATH=$dir/python "$py" -c "import infinipipe" 2>/dev/null; then
    module=$dir/python
    break
  fi
done
if [ -z "$module" ]; then
  echo "== building the module for $("$py" --version) (build-gpu/)"
  cmake_args=(-S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFINIPIPE_TESTS=OFF
    -DINFINIPIPE_BUILD_BENCH=OFF "-DPYTHON_EXECUTABLE=$(command -v "$py")")
  if [ -n "$deps" ]; then
    # MPI without its compiler wrapper (which names /usr): headers and library given.
    cmake_args+=("-DCMAKE_PREFIX_PATH=$deps/usr;$lib/cmake" "-DCMAKE_LIBRARY_PATH=$lib"
      "-DCMAKE_INCLUDE_PATH=$deps/usr/include" "-DMPI_CXX_COMPILER=MPI_CXX_COMPILER-NOTFOUND"
      "-DMPI_CXX_ADDITIONAL_INCLUDE_DIRS=$lib/openmpi/include;$lib/openmpi/include/openmpi"
      "-DMPI_CXX_LIB_NAMES=mpi" "-DMPI_mpi_LIBRARY=$lib/openmpi/lib/libmpi.so"
      -DMPI_CXX_SKIP_MPICXX=ON)
    # pybind11 from pip where Debian's is absent
    pyb=$("$py" -c "import pybind11; print(pybind11.get_cmake_dir())" 2>/dev/null || true)
    [ -n "$pyb" ] && cmake_args+=("-Dpybind11_DIR=$pyb")
  fi
  cmake "${cmake_args[@]}"
  cmake --build build-gpu --target infinipipe_python -j "$(nproc)"
  module=build-gpu/python
fi
echo "== module: $module ($((SECONDS - start)) s)"
PYTHONPATH=$module "$py" bench/gpu_check.py "${args[@]}"
echo "== gpu check: $((SECONDS - start)) s"
