#!/usr/bin/env bash
# Builds the GPU check THERE, on the machine with the GPU (scripts/gpu-check.sh calls it; the
# default mode of scripts/gpu-pack.sh carried what it needs): the project's source, and the
# Debian packages of GPU_CARRY_DEBIAN_PACKAGES as .deb files. No network and no root: the
# packages are unpacked with `dpkg -x` into a prefix, and everything is built against that
# machine's torch, found through its Python.
#
#   scripts/gpu-build.sh cxx CARRY WORK PYTHON
#     unpacks CARRY/source.tar.gz into WORK/src and CARRY/debs/*.deb into WORK/prefix, then
#     configures WORK/build (Release, CMake + ninja, LibTorch and pybind11 of PYTHON, fmt,
#     nlohmann_json, GoogleTest, Google Benchmark and CLI11 from the prefix) and builds the gpu
#     tier (graphcheck_gpu_tests), the GPU benchmarks, the CLI and the injection library, then
#     the torch-linked gpu tests (graphcheck_gpu_reference_model_test) and the Python package's
#     compiled modules.
#     Then it proves that those five packages came from the prefix: their CMake packages were
#     found there, no object read their headers from /usr/include, and the programs load
#     libfmt and libbenchmark from there. Exit status 3 when the CUDA programs were built but
#     the torch-linked targets were not, or a dependency was not the prefix's (a
#     `gpu-build: FAIL` line says which): the check goes on with them; any other non-zero
#     status: nothing to run.
#   scripts/gpu-build.sh python CARRY WORK PYTHON
#     installs the package `graphcheck` into WORK/site (`pip install --target`, no network,
#     no build isolation, no dependencies) from the modules the cxx step compiled, and checks
#     that PYTHON imports it from there (PYTHONPATH=WORK/site) beside its torch.
#
# Environment: GPU_CHECK_JOBS (build jobs, default: nproc); GPU_CHECK_CMAKE_ARGS (more configure
# arguments, words; the dry run passes -DCMAKE_IGNORE_PREFIX_PATH=/usr, docs/gpu-check.md).
set -euo pipefail

say() { echo "gpu-build: [$(date -u +%T)] $*"; }
die() { echo "gpu-build: $*" >&2; exit 1; }
(($# == 4)) || die "usage: scripts/gpu-build.sh cxx|python CARRY WORK PYTHON"
action="$1" carry="$2" work="$3" python="$4"
src="${work}/src" prefix="${work}/prefix" build="${work}/build" site="${work}/site"
# The five packages: CMake package name, and the header folder under include/ each owns.
packages=(fmt nlohmann_json GTest benchmark CLI11)
header_dirs='fmt|nlohmann|gtest|gmock|benchmark|CLI'
# Built in rounds, what the check needs most first: the gpu tier and the injection library
# (no torch), the benchmarks and the CLI, then each torch-linked target on its own, so that a
# target that fails to build (a LibTorch the code has not met) leaves the others to run, and a
# build stopped by the check's time limit has made the essential pair first.
# graphcheck_cupti_bench (the fake driver's callback path) is not built there: it runs on the
# CPU, in `make bench`.
rounds=(
  "the gpu tier and the injection library:graphcheck_gpu_tests graphcheck_inject"
  "the GPU benchmarks and the CLI:graphcheck_gpu_bench graphcheck_cli"
  "the LibTorch gpu tests:graphcheck_gpu_reference_model_test"
  "the Python package's modules:graphcheck_python"
)
partial=0  # set by a failure that leaves something usable: exit status 3

# unpack_deb DEB: its files into the prefix; dpkg -x, else ar and tar (a .deb is an ar archive
# whose data.tar.* holds the files), for an image without dpkg.
unpack_deb() {
  if command -v dpkg >/dev/null; then
    dpkg -x "$1" "${prefix}"
  else
    local member compression
    member="$(ar t "$1" | grep '^data\.tar')" || die "$1: no data.tar member"
    case "${member}" in  # tar cannot tell the compression of a pipe
      *.xz) compression=--xz ;;
      *.zst) compression=--zstd ;;
      *.gz) compression=--gzip ;;
      *) compression=--no-auto-compress ;;
    esac
    ar p "$1" "${member}" | tar -x "${compression}" -C "${prefix}" -f -
  fi
}

# config_dir PACKAGE: the folder under the prefix holding PACKAGE's CMake config file.
config_dir() {
  local file
  file="$(find "${prefix}/usr" -path "*/cmake/$1/*" \( -name "$1Config.cmake" -o -name "$1-config.cmake" \) \
    -print -quit)"
  [[ -n "${file}" ]] || die "no CMake package $1 in the unpacked .deb files (${prefix}/usr/{lib,share}/.../cmake/$1)"
  dirname "${file}"
}

build_cxx() {
  [[ -f "${carry}/source.tar.gz" ]] || die "no ${carry}/source.tar.gz: pack with scripts/gpu-pack.sh (no argument)"
  compgen -G "${carry}/debs/*.deb" >/dev/null || die "no .deb files in ${carry}/debs: pack with scripts/gpu-pack.sh"
  command -v cmake >/dev/null || die "no cmake on PATH"
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || die "no nvcc (PATH or /usr/local/cuda/bin)"
  # The source is unpacked afresh; tar keeps the files' times, so a second run in the same WORK
  # rebuilds only what changed.
  rm -rf "${src}" "${prefix}"
  mkdir -p "${src}" "${prefix}" "${build}"
  tar -xzf "${carry}/source.tar.gz" -C "${src}"
  for deb in "${carry}"/debs/*.deb; do unpack_deb "${deb}"; done
  say "unpacked the source ($(find "${src}" -type f | wc -l) files) and $(find "${carry}/debs" -name '*.deb' | wc -l) .deb files into ${prefix}"

  local torch_prefix venv="" args=() generator=()
  torch_prefix="$("${python}" -c 'import torch; print(torch.utils.cmake_prefix_path)')" ||
    die "${python} cannot import torch: the LibTorch gpu tests and the Python package are built against it"
  # A virtual environment's torch: GRAPHCHECK_TORCH_VENV also finds the wheel's CUDA libraries.
  venv="$("${python}" -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')"
  [[ -n "${venv}" && -x "${venv}/bin/python" ]] && args+=("-DGRAPHCHECK_TORCH_VENV=${venv}")
  command -v nvcc >/dev/null || args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  command -v ninja >/dev/null && generator=(-G Ninja)
  for package in "${packages[@]}"; do args+=("-D${package}_DIR=$(config_dir "${package}")"); done
  # shellcheck disable=SC2206  # words on purpose
  args+=(${GPU_CHECK_CMAKE_ARGS:-})
  say "configuring ${build} against torch ${torch_prefix}${venv:+ (environment ${venv})}"
  cmake -S "${src}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGRAPHCHECK_TORCH=ON -DGRAPHCHECK_CUPTI=ON -DGRAPHCHECK_PYTHON=ON \
    -DGRAPHCHECK_BUILD_TESTS=ON -DGRAPHCHECK_BUILD_BENCHMARKS=ON -DGRAPHCHECK_VLLM_TIER=OFF \
    -DGRAPHCHECK_INSTALL=OFF -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST \
    "-DCMAKE_PREFIX_PATH=${prefix}/usr;${torch_prefix}" "-DPython_EXECUTABLE=${python}" "${args[@]}"
  say "configured; building in ${#rounds[@]} rounds (-j ${GPU_CHECK_JOBS:-$(nproc)})"
  local round targets built=0
  for round in "${rounds[@]}"; do
    read -ra targets <<<"${round#*:}"
    say "building ${round%%:*} (${targets[*]})"
    if cmake --build "${build}" -j "${GPU_CHECK_JOBS:-$(nproc)}" --target "${targets[@]}"; then
      built=$((built + 1))
    else
      echo "gpu-build: FAIL ${round%%:*} did not build (${targets[*]}); the other rounds go on"
      partial=1
    fi
  done
  ((built > 0)) || die "no round built: nothing to run"
  say "built ${built} of ${#rounds[@]} rounds"
  verify_prefix
  ((partial == 0)) || exit 3
}

# fail_prefix WHAT: a dependency not from the prefix. The programs built still run, so the
# check goes on (exit status 3); the line says what the build cannot prove.
fail_prefix() {
  echo "gpu-build: FAIL $*"
  partial=1
}

# verify_prefix: fmt, nlohmann_json, GoogleTest, Google Benchmark and CLI11 came from the
# prefix, never from the machine: CMake's packages, the headers each object read, the libraries
# the programs load.
verify_prefix() {
  local package found file library resolved before="${partial}"
  partial=0
  for package in "${packages[@]}"; do
    found="$(grep -E "^${package}_DIR:" "${build}/CMakeCache.txt" | cut -d= -f2- || true)"
    if [[ "${found}" == "${prefix}/"* ]]; then
      echo "gpu-build: ${package}: ${found}"
    else
      fail_prefix "CMake found ${package} at '${found}', not in ${prefix}"
    fi
  done
  ((partial)) || echo "gpu-build: CMake packages ${packages[*]} found in ${prefix}"
  if [[ -f "${build}/build.ninja" ]]; then
    local deps from_usr from_prefix
    deps="$( (cd "${build}" && ninja -t deps) || true)"
    from_usr="$(grep -cE "^ +/usr/include/(${header_dirs})/" <<<"${deps}" || true)"
    from_prefix="$(grep -E "^ +${prefix}/usr/include/(${header_dirs})/" <<<"${deps}" | sort -u | wc -l || true)"
    ((from_usr == 0)) ||
      fail_prefix "${from_usr} header reads of those packages from /usr/include: $(grep -E "^ +/usr/include/(${header_dirs})/" <<<"${deps}" | sort -u | head -3 | tr -s ' ')"
    for dir in fmt nlohmann gtest gmock benchmark CLI; do
      grep -qE "^ +${prefix}/usr/include/${dir}/" <<<"${deps}" || fail_prefix "no object read a header of ${dir}/ from ${prefix}"
    done
    ((from_usr > 0)) || echo "gpu-build: headers: ${from_prefix} files of ${header_dirs//|/, } read from ${prefix}/usr/include, none from /usr/include"
  else
    echo "gpu-build: headers not checked (no ninja: the Makefile generator keeps no dependency log)"
  fi
  for file in bin/graphcheck:libfmt.so bin/graphcheck_gpu_bench:libbenchmark.so; do
    library="${file#*:}" file="${build}/${file%%:*}"
    [[ -f "${file}" ]] || continue  # its round did not build: said above
    resolved="$(ldd "${file}" 2>/dev/null | awk -v lib="${library}" 'index($1, lib) == 1 {print $3}' || true)"
    if [[ "$(readlink -f "${resolved}")" == "$(readlink -f "${prefix}")/"* ]]; then
      echo "gpu-build: ${file##*/} loads ${resolved}"
    else
      fail_prefix "${file##*/} loads ${library}* from '${resolved}', not from ${prefix}"
    fi
  done
  partial=$((partial | before))
}

install_python() {
  local modules="${build}/python/graphcheck" found
  compgen -G "${modules}/_*.so" >/dev/null || die "no compiled module in ${modules}: run the cxx step first"
  rm -rf "${site}"
  say "pip install --target ${site} (the modules of ${build})"
  # The modules are the cxx step's (cmake/GraphcheckPythonPrebuilt.cmake): no second compile.
  "${python}" -m pip install --no-build-isolation --no-deps --no-index --disable-pip-version-check \
    --target "${site}" "--config-settings=cmake.define.GRAPHCHECK_PYTHON_PREBUILT_DIR=${modules}" "${src}"
  # torch first: graphcheck._torch links libtorch_python, which `import torch` loads.
  found="$(cd / && PYTHONPATH="${site}" "${python}" -c 'import torch, graphcheck, graphcheck._torch; print(graphcheck.__file__)')" ||
    die "${python} cannot import graphcheck._torch from ${site}"
  [[ "${found}" == "${site}/"* ]] || die "${python} imports graphcheck from ${found}, not from ${site}"
  say "installed: ${found}"
}

case "${action}" in
  cxx) build_cxx ;;
  python) install_python ;;
  *) die "unknown action '${action}': expected cxx or python" ;;
esac
