#!/usr/bin/env bash
# The GPU check: one command for a machine with an NVIDIA GPU, torch 2.11 (CUDA 13), CMake
# and nvcc, and no internet. Builds graphcheck with the dependencies staged beforehand by
# scripts/gpu-stage-deps.sh (Debian .deb files in .gpu-deps/, unpacked here into a local
# prefix, never into /), runs the `gpu` test tier (and the CPU tiers as a sanity check), the
# GPU benchmarks and an injection smoke run, and writes results, logs and recorded snapshots
# into one output folder.
#
# Usage: scripts/gpu-check.sh
# Environment:
#   OUT                    output folder (default: <checkout>/build-gpu/out)
#   GRAPHCHECK_TORCH_VENV  virtual environment whose torch to use (default: python3's torch)
#   GPU_CHECK_BUILD        build folder (default: <checkout>/build-gpu)
#   GPU_CHECK_DEPS         staged .deb folder (default: <checkout>/.gpu-deps)
#   GPU_CHECK_TORCH        auto (default) or off: build without the LibTorch adapter
#   GPU_CHECK_TARGETS      space-separated targets to build (default: all)
#   GPU_CHECK_JOBS         parallel build jobs (default: nproc)
# Exit status: 0 when every step passed (tests may have skipped without a device), else 1.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPU_CHECK_BUILD:-${root}/build-gpu}"
out="${OUT:-${build}/out}"
deps="${GPU_CHECK_DEPS:-${root}/.gpu-deps}"
prefix="${build}/deps-prefix"
jobs="${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 4)}"
mkdir -p "${out}/logs" "${out}/snapshots" "${out}/bench" "${out}/inject"
summary="${out}/SUMMARY.txt"
: > "${summary}"
failed=0

note() { echo "gpu-check: $*" | tee -a "${summary}"; }
# step NAME LOG COMMAND...: runs a step, logs its output, records its status.
step() {
  local name="$1" log="$2"
  shift 2
  echo "gpu-check: == ${name}"
  if "$@" > "${out}/logs/${log}" 2>&1; then
    note "PASS ${name}"
  else
    note "FAIL ${name} (exit $?; see logs/${log})"
    failed=1
  fi
}

# --- 1. environment -------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -a)"
  echo "checkout: ${root}"
  command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"
  command -v nvcc >/dev/null && nvcc --version || echo "nvcc: not on PATH"
  cmake --version | head -1
  c++ --version | head -1
} > "${out}/environment.txt" 2>&1

# --- 2. dependencies from the staged .deb files -----------------------------------------
unpack_deps() {
  [[ -f "${deps}/MANIFEST.sha256" ]] || { echo "no ${deps}/MANIFEST.sha256: run scripts/gpu-stage-deps.sh on a machine with internet first"; return 1; }
  (cd "${deps}" && sha256sum --check --quiet MANIFEST.sha256) || return 1
  rm -rf "${prefix}"
  mkdir -p "${prefix}"
  local deb
  for deb in "${deps}"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "${deb}" "${prefix}" || return 1
    else
      # Not a Debian machine: a .deb is an ar archive holding data.tar.{xz,zst,gz}.
      local tmp
      tmp="$(mktemp -d)"
      (cd "${tmp}" && ar x "${deb}" && tar -xf data.tar.* -C "${prefix}") || return 1
      rm -rf "${tmp}"
    fi
    echo "unpacked $(basename "${deb}")"
  done
}
step "unpack staged dependencies into ${prefix}" unpack.log unpack_deps

# The package config files: found explicitly so that a system copy elsewhere never wins.
config_dir() { dirname "$(find "${prefix}" -name "$1" -print -quit 2>/dev/null)" 2>/dev/null; }
cmake_args=(
  -DCMAKE_BUILD_TYPE=Release
  -DGRAPHCHECK_CUPTI=ON
  -DGRAPHCHECK_BUILD_TESTS=ON
  -DGRAPHCHECK_BUILD_BENCHMARKS=ON
  "-DGTest_DIR=$(config_dir GTestConfig.cmake)"
  "-Dbenchmark_DIR=$(config_dir benchmarkConfig.cmake)"
  "-Dfmt_DIR=$(config_dir fmt-config.cmake)"
  "-Dnlohmann_json_DIR=$(config_dir nlohmann_jsonConfig.cmake)"
  "-DCLI11_DIR=$(config_dir CLI11Config.cmake)"
)
prefix_path="${prefix}/usr"

# --- 3. torch -------------------------------------------------------------------------
if [[ "${GPU_CHECK_TORCH:-auto}" == "off" ]]; then
  cmake_args+=(-DGRAPHCHECK_TORCH=OFF)
  note "torch: off (GPU_CHECK_TORCH=off)"
elif [[ -n "${GRAPHCHECK_TORCH_VENV:-}" ]]; then
  cmake_args+=(-DGRAPHCHECK_TORCH=ON "-DGRAPHCHECK_TORCH_VENV=${GRAPHCHECK_TORCH_VENV}")
  note "torch: ${GRAPHCHECK_TORCH_VENV}"
elif torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path, end="")' 2>/dev/null)"; then
  cmake_args+=(-DGRAPHCHECK_TORCH=ON)
  prefix_path="${prefix_path};${torch_prefix}"
  note "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null) from python3"
else
  cmake_args+=(-DGRAPHCHECK_TORCH=OFF)
  note "torch: not found for python3; building without the LibTorch adapter"
fi
cmake_args+=("-DCMAKE_PREFIX_PATH=${prefix_path}")
# Torch's CMake config probes the GPU with a CUDA try_run that CMake < 3.26 cannot compile
# (it asks for CUDA20); naming the architecture skips the probe.
if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]]; then
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')"
  TORCH_CUDA_ARCH_LIST="${arch:-9.0}"
fi
cmake_args+=("-DTORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST}")

# --- 4. configure and build -----------------------------------------------------------
step "configure" configure.log cmake -S "${root}" -B "${build}" "${cmake_args[@]}"
build_args=(--build "${build}" -j "${jobs}")
if [[ -n "${GPU_CHECK_TARGETS:-}" ]]; then
  read -r -a targets <<< "${GPU_CHECK_TARGETS}"
  build_args+=(--target "${targets[@]}")
fi
step "build" build.log cmake "${build_args[@]}"
cp "${build}/CMakeCache.txt" "${out}/logs/CMakeCache.txt" 2>/dev/null

# --- 5. tests -------------------------------------------------------------------------
export GRAPHCHECK_GPU_OUT="${out}/snapshots"
run_tier() {
  ctest --test-dir "${build}" -L "$1" --output-on-failure --no-tests=ignore \
    --output-junit "${out}/ctest-$1.xml"
}
if [[ "${failed}" -ne 0 ]]; then
  note "NOTE an earlier step failed: the results below may be incomplete"
fi
for tier in gpu cupti-fake unit; do
  step "ctest -L ${tier}" "ctest-${tier}.log" run_tier "${tier}"
  if grep -q "No tests were found" "${out}/logs/ctest-${tier}.log" 2>/dev/null; then
    note "NOTE no ${tier} tests were built"
  fi
done
# Skips are not failures, but the summary must say the GPU path did not run.
if grep -q "Skipped" "${out}/logs/ctest-gpu.log" 2>/dev/null; then
  note "NOTE gpu tests skipped (no device?): the GPU path is still unverified"
fi

# --- 6. benchmarks --------------------------------------------------------------------
bench_bin="${build}/bin/graphcheck_gpu_bench"
if [[ -x "${bench_bin}" ]]; then
  step "gpu benchmarks" gpu-bench.log "${bench_bin}" --benchmark_repetitions=3 \
    --benchmark_out="${out}/bench/gpu_bench.json" --benchmark_out_format=json
  if grep -q '"error_occurred": true' "${out}/bench/gpu_bench.json" 2>/dev/null; then
    note "NOTE gpu benchmarks reported errors (no device?); see logs/gpu-bench.log"
  fi
else
  note "SKIP gpu benchmarks (${bench_bin} not built)"
fi
if [[ -x "${build}/bin/graphcheck_cupti_bench" ]]; then
  step "cupti callback benchmark (CPU)" cupti-bench.log "${build}/bin/graphcheck_cupti_bench" \
    --benchmark_out="${out}/bench/cupti_bench.json" --benchmark_out_format=json
fi

# --- 7. injection smoke run: the gpu test binary under CUDA_INJECTION64_PATH ----------------
inject_lib="${build}/lib/libgraphcheck_inject.so"
gpu_tests="${build}/bin/graphcheck_gpu_tests"
if [[ -f "${inject_lib}" && -x "${gpu_tests}" ]]; then
  inject_run() {
    CUDA_INJECTION64_PATH="${inject_lib}" GRAPHCHECK_CHECK=exit GRAPHCHECK_POLICY=warn \
      GRAPHCHECK_OUT="${out}/inject" "${gpu_tests}" --gtest_filter='*PlainKernel*'
  }
  step "injection smoke run" inject.log inject_run
else
  note "SKIP injection smoke run (library or gpu test binary not built)"
fi

note "results in ${out}"
exit "${failed}"
