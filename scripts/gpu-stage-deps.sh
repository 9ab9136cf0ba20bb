#!/usr/bin/env bash
# Stages the build dependencies for scripts/gpu-check.sh on a machine WITH internet (this
# development machine): downloads Debian's .deb files of GoogleTest, Google Benchmark,
# nlohmann-json, CLI11 and fmt into .gpu-deps/ inside the checkout (git-ignored, about 2 MB).
# Nothing is installed. Copy the checkout, .gpu-deps/ included, to the GPU machine and run
# scripts/gpu-check.sh there; it unpacks the files into a local prefix, never into /.
#
# Usage: scripts/gpu-stage-deps.sh [DEST]   (DEST defaults to <checkout>/.gpu-deps)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${root}/.gpu-deps}"
packages=(googletest libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
          nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9)

command -v apt-get >/dev/null || { echo "gpu-stage-deps: apt-get not found; run this on the Debian development machine" >&2; exit 2; }
mkdir -p "${dest}"
rm -f "${dest}"/*.deb
# apt-get download writes into the current folder; run it as a user that can write there.
(cd "${dest}" && apt-get download "${packages[@]}")
for package in "${packages[@]}"; do
  ls "${dest}/${package}"_*.deb >/dev/null 2>&1 || { echo "gpu-stage-deps: ${package} was not downloaded" >&2; exit 1; }
done
# A manifest, so gpu-check.sh can tell a complete staging from a partial one.
(cd "${dest}" && sha256sum ./*.deb > MANIFEST.sha256)
echo "gpu-stage-deps: staged ${#packages[@]} packages in ${dest} ($(du -sh "${dest}" | cut -f1))"
