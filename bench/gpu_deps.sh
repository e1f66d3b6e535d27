#!/usr/bin/env bash
# Run where apt works (this project's Debian 12 machines): downloads the Debian packages that
# building and importing `infinipipe` needs beyond a compiler, CMake, Python and PyTorch, and
# unpacks them into DIR (headers, libraries, CMake and pkg-config files), for
# `bench/gpu_check.sh --deps DIR` on a machine without them and without network.
# The libraries are those the built module loads (ldd of build/python/infinipipe/_core*.so,
# minus the C and C++ runtimes every machine has; the reference LAPACK instead of OpenBLAS),
# plus the -dev packages with their headers; static libraries are left out. DIR.tar.xz is the
# same, packed (about 20 MiB) to carry.
#   bash bench/gpu_deps.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash bench/gpu_deps.sh DIR}
so=$(ls build/python/infinipipe/_core*.so 2>/dev/null | head -1)
[ -n "$so" ] || { echo "gpu_deps: build the module first (cmake --build --preset release)" >&2; exit 2; }
base='^(libc6|libgcc-s1|libstdc\+\+6|libgomp1|libpython3\.[0-9]+|zlib1g|libopenblas0-pthread)$'
runtime=$(ldd "$so" | awk '/=>/ {print $3}' | while read -r l; do
  dpkg -S "$(readlink -f "$l")" 2>/dev/null | cut -d: -f1
done | sort -u | grep -Ev "$base" || true)
dev=(nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libfmt-dev libdnnl-dev libopenmpi-dev
  coinor-libcbc-dev coinor-libcgl-dev coinor-libclp-dev coinor-libcoinutils-dev
  coinor-libosi-dev libsentencepiece-dev pybind11-dev)
mkdir -p "$out/debs"
(cd "$out/debs" && apt-get download $runtime "${dev[@]}" liblapack3 libblas3 2>&1 |
  grep -v 'unsandboxed as root' || true)
for f in "$out"/debs/*.deb; do dpkg -x "$f" "$out"; done
lib=$out/usr/lib/x86_64-linux-gnu
ln -sf lapack/liblapack.so.3 "$lib/liblapack.so.3"  # Debian's alternatives, as links of its own
ln -sf blas/libblas.so.3 "$lib/libblas.so.3"
find "$out" -name '*.a' -delete
rm -rf "$out/debs" "$out/usr/share/doc" "$out/usr/share/man" "$lib/fortran"
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
echo "gpu_deps: $(echo $runtime | wc -w) runtime and ${#dev[@]} development packages in $out" \
  "($(du -sh "$out" | cut -f1)), packed in $out.tar.xz ($(du -sh "$out.tar.xz" | cut -f1))"
