#!/usr/bin/env bash
# The GPU check: one command for a machine with an NVIDIA GPU, torch 2.13 (CUDA 13), CMake
# and nvcc, and no internet. Builds graphcheck with the dependencies staged beforehand by
# scripts/gpu-stage-deps.sh (Debian .deb files in .gpu-deps/, unpacked here into a local
# prefix, never into /), runs the `gpu` test tier (and the cupti-fake tier as a sanity check
# of that machine's compiler), the GPU benchmarks and an injection smoke run, and collects
# results, logs and recorded snapshots.
#
# The whole run keeps to a time budget (a lent GPU machine is held for minutes, not hours):
# every step runs under `timeout`, gets at most what is left of the budget, and a step that
# finds too little left is skipped and says so. Results are packed after every step, so a
# run cut short still hands back what it finished.
#
# Usage: scripts/gpu-check.sh
# Environment:
#   OUT                    where the results go: SUMMARY.txt and gpu-check-results.tar.gz
#                          (two files, refreshed after every step; a tool that returns only
#                          a few files from a shallow folder gets everything). Unset: the
#                          results stay unpacked in the results folder only.
#   GPU_CHECK_RESULTS      results folder (default: <build>/results)
#   GPU_CHECK_BUDGET_S     time budget of the whole run in seconds (default: 480)
#   GRAPHCHECK_TORCH_VENV  virtual environment whose torch to use (default: python3's torch)
#   GPU_CHECK_BUILD        build folder (default: <checkout>/build-gpu)
#   GPU_CHECK_DEPS         staged .deb folder (default: <checkout>/.gpu-deps)
#   GPU_CHECK_TORCH        auto (default) or off: build without the LibTorch adapter
#   GPU_CHECK_TARGETS      space-separated targets to build (default: what the steps run)
#   GPU_CHECK_TIERS        space-separated ctest labels to run (default: "gpu cupti-fake")
#   GPU_CHECK_JOBS         parallel build jobs (default: nproc)
# Exit status: 0 when every step passed, else 1. On a machine with a GPU (nvidia-smi lists a
# device, or /dev/nvidia0 exists) a skipped gpu test, or a gpu tier with no tests, is a failure:
# the point of the run is the GPU path. Without a GPU (a dry run) skips are expected and noted.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPU_CHECK_BUILD:-${root}/build-gpu}"
results="${GPU_CHECK_RESULTS:-${build}/results}"
deps="${GPU_CHECK_DEPS:-${root}/.gpu-deps}"
prefix="${build}/deps-prefix"
jobs="${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 4)}"
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-480}))
rm -rf "${results}"
mkdir -p "${results}/logs" "${results}/snapshots" "${results}/bench" "${results}/inject"
summary="${results}/SUMMARY.txt"
: > "${summary}"
failed=0

note() { echo "gpu-check: [$(date -u +%T)] $*" | tee -a "${summary}"; }

# pack: hands the results to $OUT as two files (written aside first, then renamed, so a
# run killed mid-pack leaves the previous pack whole).
pack() {
  [[ -n "${OUT:-}" ]] || return 0
  mkdir -p "${OUT}"
  tar -czf "${OUT}/.gpu-check-results.tar.gz" -C "${results}" . 2>/dev/null &&
    mv -f "${OUT}/.gpu-check-results.tar.gz" "${OUT}/gpu-check-results.tar.gz"
  cp -f "${summary}" "${OUT}/SUMMARY.txt"
}

# step NAME LOG LIMIT_S COMMAND...: runs an external command under `timeout` with at most
# LIMIT_S seconds and never past the budget, logs its output, records its status, packs.
step() {
  local name="$1" log="$2" limit="$3"
  shift 3
  local left=$((deadline - SECONDS))
  if ((left < 15)); then
    note "SKIP ${name} (time budget spent: ${left} s left)"
    failed=1
    pack
    return 1
  fi
  ((limit > left)) && limit="${left}"
  echo "gpu-check: == ${name} (at most ${limit} s)"
  local start="${SECONDS}" status=0
  timeout --kill-after=10 "${limit}" "$@" > "${results}/logs/${log}" 2>&1 || status=$?
  if ((status == 0)); then
    note "PASS ${name} ($((SECONDS - start)) s)"
  elif ((status == 124 || status == 137)); then
    note "FAIL ${name} (timed out after ${limit} s; see logs/${log})"
    failed=1
  else
    note "FAIL ${name} (exit ${status} after $((SECONDS - start)) s; see logs/${log})"
    failed=1
  fi
  pack
  return "${status}"
}

# --- 1. environment -------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -a)"
  echo "checkout: ${root} ($(git -C "${root}" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"
  command -v nvcc >/dev/null && nvcc --version || echo "nvcc: not on PATH"
  cmake --version | head -1
  c++ --version | head -1
  command -v ninja >/dev/null && echo "ninja $(ninja --version)" || echo "ninja: not found"
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
} > "${results}/environment.txt" 2>&1
cp "${results}/environment.txt" "${results}/logs/environment.log"
note "checkout ${root}, budget ${GPU_CHECK_BUDGET_S:-480} s, ${jobs} jobs"
# Whether this machine has a GPU decides what a skipped gpu test means (section 5).
gpu_present=0
if { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; } ||
  [[ -e /dev/nvidia0 ]]; then
  gpu_present=1
  note "device: GPU present; a skipped gpu test fails the check"
else
  note "device: no GPU found (no device in nvidia-smi -L, no /dev/nvidia0): dry run, gpu tests are expected to skip"
fi

# --- 2. dependencies from the staged .deb files -----------------------------------------
[[ -f "${deps}/MANIFEST.sha256" ]] || note "NOTE no ${deps}/MANIFEST.sha256: run scripts/gpu-stage-deps.sh on a machine with internet first"
rm -rf "${prefix}"
mkdir -p "${prefix}"
# Where dpkg is missing a .deb is unpacked as what it is: an ar archive holding data.tar.*.
# shellcheck disable=SC2016  # the inner script expands its own arguments
step "unpack staged dependencies into ${prefix}" unpack.log 60 bash -c '
  set -e
  deps="$1" prefix="$2"
  cd "${deps}" && sha256sum --check --quiet MANIFEST.sha256
  for deb in "${deps}"/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "${deb}" "${prefix}"
    else
      tmp="$(mktemp -d)"
      (cd "${tmp}" && ar x "${deb}" && tar -xf data.tar.* -C "${prefix}")
      rm -rf "${tmp}"
    fi
    echo "unpacked $(basename "${deb}")"
  done' unpack "${deps}" "${prefix}"

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
command -v ninja >/dev/null && cmake_args+=(-G Ninja)
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
step "configure" configure.log 120 cmake -S "${root}" -B "${build}" "${cmake_args[@]}"
cp "${build}/CMakeCache.txt" "${results}/logs/CMakeCache.txt" 2>/dev/null
# Only what the steps below run (the full build with every torch test would not fit the
# budget on a lent machine); the CPU tiers run in CI on every change anyway.
wanted="graphcheck_gpu_tests graphcheck_gpu_reference_model_test graphcheck_gpu_bench graphcheck_inject cupti_fake_test graphcheck_cupti_bench graphcheck_cli graphcheck_python"
known="$(cmake --build "${build}" --target help 2>/dev/null)"
default_targets=""
for target in ${wanted}; do
  # `help` lists "... name" (Makefiles) or "name: phony" (Ninja).
  grep -Eq "(^|[ .])${target}(:| |$)" <<< "${known}" && default_targets+="${target} "
done
read -r -a targets <<< "${GPU_CHECK_TARGETS:-${default_targets}}"
step "build ${targets[*]}" build.log 360 cmake --build "${build}" -j "${jobs}" --target "${targets[@]}"

# --- 5. tests -------------------------------------------------------------------------
export GRAPHCHECK_GPU_OUT="${results}/snapshots"
# junit_count TIER ATTRIBUTE: a count from the tier's JUnit file (tests, skipped, disabled).
junit_count() {
  grep -o "$2=\"[0-9]*\"" "${results}/ctest-$1.xml" 2>/dev/null | head -1 | tr -dc '0-9'
}
read -r -a tiers <<< "${GPU_CHECK_TIERS:-gpu cupti-fake}"
for tier in "${tiers[@]}"; do
  step "ctest -L ${tier}" "ctest-${tier}.log" 180 ctest --test-dir "${build}" -L "${tier}" \
    --output-on-failure --no-tests=ignore --timeout 150 --output-junit "${results}/ctest-${tier}.xml"
  if [[ -f "${results}/ctest-${tier}.xml" && "$(junit_count "${tier}" tests)" == "0" ]]; then
    note "NOTE no ${tier} tests were built"
  fi
done
# A skipped gpu test means the GPU path did not run: a failure where there is a GPU, a note in
# a dry run. (gtest_discover_tests maps GTEST_SKIP to a CTest skip.)
if [[ -f "${results}/ctest-gpu.xml" ]]; then
  gpu_total="$(junit_count gpu tests)"
  gpu_skipped="$(junit_count gpu skipped)"
  gpu_disabled="$(junit_count gpu disabled)"
  gpu_not_run=$((${gpu_skipped:-0} + ${gpu_disabled:-0}))
  if ((gpu_present)) && ((${gpu_total:-0} == 0)); then
    note "FAIL no gpu tests were built on a machine with a GPU (see logs/build.log)"
    failed=1
  elif ((gpu_present)) && ((gpu_not_run > 0)); then
    note "FAIL gpu tests skipped on a machine with a GPU: ${gpu_not_run} of ${gpu_total} did not run (see logs/ctest-gpu.log for why)"
    failed=1
  elif ((gpu_not_run > 0)); then
    note "NOTE gpu tests skipped (${gpu_not_run} of ${gpu_total}; no GPU found): the GPU path is still unverified"
  fi
fi

# --- 6. benchmarks --------------------------------------------------------------------
bench_bin="${build}/bin/graphcheck_gpu_bench"
if [[ -x "${bench_bin}" ]]; then
  step "gpu benchmarks" gpu-bench.log 150 "${bench_bin}" --benchmark_repetitions=3 \
    --benchmark_out="${results}/bench/gpu_bench.json" --benchmark_out_format=json
  if grep -q '"error_occurred": true' "${results}/bench/gpu_bench.json" 2>/dev/null; then
    if ((gpu_present)); then
      note "FAIL gpu benchmarks reported errors on a machine with a GPU; see logs/gpu-bench.log"
      failed=1
    else
      note "NOTE gpu benchmarks reported errors (no GPU found); see logs/gpu-bench.log"
    fi
  fi
else
  note "SKIP gpu benchmarks (${bench_bin} not built)"
fi
if [[ -x "${build}/bin/graphcheck_cupti_bench" ]]; then
  step "cupti callback benchmark (CPU)" cupti-bench.log 60 "${build}/bin/graphcheck_cupti_bench" \
    --benchmark_min_time=0.1 --benchmark_out="${results}/bench/cupti_bench.json" \
    --benchmark_out_format=json
fi

# --- 7. injection smoke run: the gpu test binary under CUDA_INJECTION64_PATH ----------------
inject_lib="${build}/lib/libgraphcheck_inject.so"
gpu_tests="${build}/bin/graphcheck_gpu_tests"
if [[ -f "${inject_lib}" && -x "${gpu_tests}" ]]; then
  step "injection smoke run" inject.log 60 env CUDA_INJECTION64_PATH="${inject_lib}" \
    GRAPHCHECK_CHECK=exit GRAPHCHECK_POLICY=warn GRAPHCHECK_OUT="${results}/inject" \
    "${gpu_tests}" --gtest_filter='*PlainKernel*'
  # On a GPU the library writes its exit snapshot and reports: none means it never attached.
  note "NOTE injection wrote $(find "${results}/inject" -type f | wc -l) files: $(ls "${results}/inject" | tr '\n' ' ')"
else
  note "SKIP injection smoke run (library or gpu test binary not built)"
fi

# --- 8. injection into a torch program (python3's torch) ---------------------------------
if [[ -f "${inject_lib}" ]] && python3 -c 'import torch' 2>/dev/null; then
  mkdir -p "${results}/inject-torch"
  step "injection smoke run (torch)" inject-torch.log 90 env CUDA_INJECTION64_PATH="${inject_lib}" \
    GRAPHCHECK_CHECK=launch GRAPHCHECK_POLICY=warn GRAPHCHECK_OUT="${results}/inject-torch" \
    python3 "${root}/tests/gpu/inject_torch_smoke.py"
  # How many graphs each snapshot it wrote holds: the launch one must have torch's graph; the
  # exit one tells whether Python's shutdown destroyed it before the exit check.
  note "NOTE torch injection: $(python3 - "${results}/inject-torch" <<'PY' 2>&1
import glob, json, os, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "*-snapshot.json")))
print(" ".join(f"{os.path.basename(f)}: {len(json.load(open(f)).get('graphs', []))} graph(s)" for f in files) or "no snapshot written")
PY
)"
  # The exit check of a graph destroyed before exit (issue 18): it must be in the exit
  # report, checked when its exec graph was destroyed; 0 graphs means the check missed it.
  mkdir -p "${results}/inject-torch-exit"
  step "injection exit check of a destroyed graph (torch)" inject-torch-exit.log 90 \
    env CUDA_INJECTION64_PATH="${inject_lib}" GRAPHCHECK_CHECK=exit GRAPHCHECK_POLICY=warn \
    GRAPHCHECK_OUT="${results}/inject-torch-exit" \
    python3 "${root}/tests/gpu/inject_torch_smoke.py" --destroy-graph
  step "the exit report holds the destroyed graph" inject-torch-exit-report.log 30 \
    python3 - "${results}/inject-torch-exit" <<'PY'
import glob, json, os, sys
reports = glob.glob(os.path.join(sys.argv[1], "*-exit-report.json"))
if not reports:
    sys.exit("no exit report written: the library did not attach or did not reach its exit check")
report = json.load(open(reports[0]))
graphs = report["summary"]["graphs"]
notes = [w for w in report.get("warnings", []) if w.startswith("note: ")]
print(f"exit report: {graphs} graph(s); notes: {notes}")
sys.exit(0 if graphs >= 1 and any("destroyed" in n for n in notes) else 1)
PY
else
  note "SKIP injection smoke run (torch): library not built or python3 has no torch"
fi

# --- 9. the server debug flag: graphcheck.watch on torch.cuda.graph (UNVERIFIED until run) ----
# The package from this checkout with the modules this build compiled (no pip, nothing
# installed): python/graphcheck/ copied beside build/python/graphcheck/_*.so.
watch_pkg="${build}/watch-smoke-package"
if compgen -G "${build}/python/graphcheck/_torch*.so" > /dev/null && python3 -c 'import torch' 2>/dev/null; then
  rm -rf "${watch_pkg}" && mkdir -p "${watch_pkg}" && cp -r "${root}/python/graphcheck" "${watch_pkg}/" \
    && cp "${build}"/python/graphcheck/_*.so "${watch_pkg}/graphcheck/"
  for variant in legacy registered; do
    step "watch smoke (${variant})" "watch-smoke-${variant}.log" 90 env PYTHONPATH="${watch_pkg}" \
      python3 "${root}/tests/gpu/watch_smoke.py" --variant "${variant}" --out "${results}/watch"
  done
  note "NOTE watch smoke: $(cat "${results}"/logs/watch-smoke-*.log 2>/dev/null | grep '^watch_smoke' | tr '\n' ' ')"
else
  note "SKIP watch smoke (graphcheck._torch not built or python3 has no torch): the CUDA path of GRAPHCHECK=1 stays unverified"
fi

note "done in ${SECONDS} s; results in ${results}${OUT:+, packed into ${OUT}/gpu-check-results.tar.gz}"
pack
exit "${failed}"
