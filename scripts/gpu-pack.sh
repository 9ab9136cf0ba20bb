#!/usr/bin/env bash
# Packs the GPU check for a machine with a GPU (run HERE, in a checkout) into one git-ignored
# folder, `gpu-carry/`, which is copied to the GPU machine (docs/gpu-check.md). Two modes:
#
# Default: build there. Nothing is compiled here; the GPU machine (nvcc, CMake, a C++ compiler,
# Python with a CUDA torch, pybind11 and scikit-build-core, no network) builds the gpu tier, the
# LibTorch gpu tests and the Python package against its own torch (scripts/gpu-build.sh).
#   gpu-carry/source.tar.gz  the checkout's files as they are now (tracked files with their
#                            uncommitted changes, and untracked files git does not ignore)
#   gpu-carry/debs/          the .deb files of GPU_CARRY_DEBIAN_PACKAGES (scripts/versions.env:
#                            fmt, nlohmann_json, GoogleTest, Google Benchmark, CLI11), from
#                            Debian's mirror (`apt-get download`), unpacked there with `dpkg -x`
#   gpu-carry/MANIFEST.txt   mode, commit, each package's version, sha256 of every file, size
#
# --binaries: the carried binaries (the fallback). Built here in a release build, stripped and
# staged with the libraries and scripts they need; nothing is built there.
#   gpu-carry/bin/   graphcheck_gpu_tests, graphcheck_gpu_bench,
#                    graphcheck (the CLI)
#   gpu-carry/lib/   libgraphcheck_inject.so, and the Debian shared libraries the binaries
#                    need that a CUDA image lacks (libbenchmark, libfmt); binaries find them
#                    through RUNPATH $ORIGIN/../lib, never through a path of this machine
#   gpu-carry/scripts/  the Python smoke runs and the overhead benchmark (tests/gpu/*.py), the
#                       watch's capture benchmark (bench/python/bench_watch.py, bench_capture.py)
#   gpu-carry/MANIFEST.txt  mode, commit, build flags, NEEDED/RUNPATH per binary, sizes, sha256
# The LibTorch-linked gpu tests (graphcheck_gpu_reference_model_test) are not packed in this
# mode: they need the GPU machine's torch, which only a build there links against.
#
# Fails when the folder exceeds GPU_PACK_LIMIT_MIB (default 64), or (--binaries) when a binary
# needs a path of this machine.
#
# Usage: scripts/gpu-pack.sh [--binaries]
# Environment:
#   GPU_PACK_OUT     the folder to stage (default: <checkout>/gpu-carry)
#   GPU_PACK_LIMIT_MIB  size limit (default: 64)
#   GPU_PACK_BUILD   --binaries: build folder (default: <checkout>/build-gpu-pack; configured if needed)
#   GPU_PACK_JOBS    --binaries: parallel build jobs (default: 1)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPU_PACK_BUILD:-${root}/build-gpu-pack}"
carry="${GPU_PACK_OUT:-${root}/gpu-carry}"
jobs="${GPU_PACK_JOBS:-1}"
limit_mib="${GPU_PACK_LIMIT_MIB:-64}"
# shellcheck disable=SC2016  # $ORIGIN is the loader's (the binary's folder), not the shell's
origin='$ORIGIN/../lib'
binaries=(graphcheck_gpu_tests graphcheck_gpu_bench graphcheck)
targets=(graphcheck_gpu_tests graphcheck_gpu_bench graphcheck_cli graphcheck_inject)
say() { echo "gpu-pack: $*"; }
die() { echo "gpu-pack: $*" >&2; exit 1; }

mode=build-there
case "${1:-}" in
  "") ;;
  --binaries) mode=binaries ;;
  *) die "unknown argument '${1}': expected no argument (build there) or --binaries" ;;
esac

# finish: the manifest's size line, then the limit.
finish() {
  local size_kib
  size_kib="$(du -sk "${carry}" | cut -f1)"
  echo "size: ${size_kib} KiB" >> "${carry}/MANIFEST.txt"
  say "staged $(find "${carry}" -type f | wc -l) files in ${carry} (${mode}): ${size_kib} KiB (limit ${limit_mib} MiB)"
  ((size_kib <= limit_mib * 1024)) || die "${carry} is ${size_kib} KiB, over the ${limit_mib} MiB limit (GPU_PACK_LIMIT_MIB)"
}

commit_line() {
  echo "commit: $(git -C "${root}" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "${root}" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
}

if [[ "${mode}" == build-there ]]; then
  # shellcheck source=scripts/versions.env
  source "${root}/scripts/versions.env"
  command -v apt-get >/dev/null ||
    die "no apt-get: the .deb files come from Debian's mirror (GPU_CARRY_DEBIAN_PACKAGES)"
  rm -rf "${carry}"
  mkdir -p "${carry}/debs"
  # The files of the working tree, not of a commit: what is tested is what is here. Deleted
  # files that git still tracks are left out; ignored ones (builds, gpu-carry/) never travel.
  (cd "${root}" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do [[ -f "${file}" ]] && printf '%s\0' "${file}"; done |
    tar --null -T - -czf "${carry}/source.tar.gz")
  # shellcheck disable=SC2086  # the list is words
  (cd "${carry}/debs" && apt-get download ${GPU_CARRY_DEBIAN_PACKAGES} > .apt.log 2>&1) ||
    die "apt-get download failed: $(tail -3 "${carry}/debs/.apt.log")"
  rm -f "${carry}/debs/.apt.log"
  {
    echo "graphcheck GPU check carry"
    echo "mode: build-there"
    commit_line
    echo "packed: $(date -u +%FT%TZ) on $(uname -srm)"
    echo "source: $(tar -tzf "${carry}/source.tar.gz" | wc -l) files"
    for deb in "${carry}"/debs/*.deb; do
      echo "deb: $(dpkg-deb -f "${deb}" Package) $(dpkg-deb -f "${deb}" Version) ($(stat -c %s "${deb}") bytes)"
    done
    (cd "${carry}" && sha256sum source.tar.gz debs/*.deb)
  } > "${carry}/MANIFEST.txt"
  for package in ${GPU_CARRY_DEBIAN_PACKAGES}; do
    grep -q "^deb: ${package} " "${carry}/MANIFEST.txt" || die "apt-get download did not fetch ${package}"
  done
  finish
  exit 0
fi

command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] ||
  die "no nvcc: the gpu tier needs the CUDA toolkit (the tests and kernels are built here)"

# A release build without LibTorch or the Python modules (nothing carried needs them);
# RUNPATH $ORIGIN/../lib, so the staged binaries find the staged libraries wherever they are.
if [[ ! -f "${build}/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "${root}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGRAPHCHECK_CUPTI=ON -DGRAPHCHECK_TORCH=OFF -DGRAPHCHECK_PYTHON=OFF \
    -DGRAPHCHECK_BUILD_TESTS=ON -DGRAPHCHECK_BUILD_BENCHMARKS=ON -DGRAPHCHECK_VLLM_TIER=OFF \
    -DGRAPHCHECK_INSTALL=OFF "-DCMAKE_BUILD_RPATH=${origin}" >/dev/null
fi
grep -qF "=${origin}" <(grep '^CMAKE_BUILD_RPATH:' "${build}/CMakeCache.txt") ||
  cmake "${build}" "-DCMAKE_BUILD_RPATH=${origin}" >/dev/null
say "building ${targets[*]} in ${build} (-j ${jobs})"
cmake --build "${build}" -j "${jobs}" --target "${targets[@]}"

rm -rf "${carry}"
mkdir -p "${carry}/bin" "${carry}/lib" "${carry}/scripts"
for binary in "${binaries[@]}"; do
  [[ -x "${build}/bin/${binary}" ]] || die "${build}/bin/${binary} was not built"
  strip --strip-unneeded -o "${carry}/bin/${binary}" "${build}/bin/${binary}"
done
# The injection library keeps its dynamic symbol table (InitializeInjection) when stripped.
strip --strip-unneeded -o "${carry}/lib/libgraphcheck_inject.so" "${build}/lib/libgraphcheck_inject.so"
cp "${root}"/tests/gpu/*.py "${carry}/scripts/"
# The watch's capture benchmark (--device cuda) and its helpers (issue 32 §2).
cp "${root}"/bench/python/bench_watch.py "${root}"/bench/python/bench_capture.py "${carry}/scripts/"

# Shared libraries: the C and C++ runtimes come from the machine (a library the injection
# loads into a host process must share the host's libstdc++); everything else the binaries
# need travels, copied from where this machine's loader finds it.
system_libs='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
for file in "${carry}"/bin/* "${carry}"/lib/libgraphcheck_inject.so; do
  while read -r name path; do
    [[ "${name}" =~ ${system_libs} ]] && continue
    [[ -f "${carry}/lib/${name}" ]] && continue
    [[ -n "${path}" && -f "${path}" ]] || die "${file##*/} needs ${name}, which this machine cannot find"
    cp -L "${path}" "${carry}/lib/${name}"
    strip --strip-unneeded "${carry}/lib/${name}"
    say "staged ${name} from ${path}"
  done < <(ldd "${file}" | awk '/=>/ {print $1, $3}')
done

# No path of this machine may remain: RUNPATH/RPATH must be $ORIGIN-relative, and every
# library must resolve inside the folder or among the system runtimes.
{
  echo "graphcheck GPU check carry"
  echo "mode: binaries"
  commit_line
  echo "packed: $(date -u +%FT%TZ) on $(uname -srm)"
  echo "build: ${build} ($(grep -E '^CMAKE_BUILD_TYPE:' "${build}/CMakeCache.txt" | cut -d= -f2), $(grep -E '^CMAKE_CUDA_COMPILER:' "${build}/CMakeCache.txt" | cut -d= -f2), CUDA architectures: tests/gpu/CMakeLists.txt's unless CMAKE_CUDA_ARCHITECTURES is set)"
  echo "compiler: $(c++ --version | head -1)"
  echo "glibc needed: $(objdump -T "${carry}"/bin/* "${carry}"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1), libstdc++ needed: $(objdump -T "${carry}"/bin/* "${carry}"/lib/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)"
} > "${carry}/MANIFEST.txt"
for file in "${carry}"/bin/* "${carry}"/lib/*.so*; do
  runpath="$(readelf -d "${file}" | grep -E 'RUNPATH|RPATH' | sed 's/.*\[\(.*\)\]/\1/' || true)"
  needed="$(readelf -d "${file}" | awk '/NEEDED/ {gsub(/[][]/, "", $5); print $5}' | tr '\n' ' ')"
  if [[ -n "${runpath}" && "${runpath}" != "${origin}" ]]; then
    die "${file##*/} has RUNPATH ${runpath}: a path of this machine"
  fi
  if LD_LIBRARY_PATH='' ldd "${file}" | grep -q 'not found'; then
    die "${file##*/}: $(ldd "${file}" | grep 'not found' | tr '\n' ' ')"
  fi
  if LD_LIBRARY_PATH='' ldd "${file}" | awk '/=>/ {print $3}' | xargs -r readlink -f |
    grep -v "^$(readlink -f "${carry}")/lib/" |
    grep -vE "/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so" | grep -q .; then
    die "${file##*/} resolves a library outside ${carry}/lib and the system runtimes"
  fi
  echo "${file#"${carry}"/}: needs ${needed}runpath ${runpath:-none}"
done >> "${carry}/MANIFEST.txt"
(cd "${carry}" && find bin lib scripts -type f -exec sha256sum {} + | sort -k2) >> "${carry}/MANIFEST.txt"

finish
