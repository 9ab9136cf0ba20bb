#!/usr/bin/env bash
# The GPU check (run THERE, on a machine with an NVIDIA GPU), one command. By default it
# builds what it runs there, from what scripts/gpu-pack.sh carried (the source and a few .deb
# files; scripts/gpu-build.sh): the gpu tier with the LibTorch gpu tests, the benchmarks, the
# CLI, the injection library and the Python package, against that machine's torch. Fallback
# (gpu-pack.sh --binaries): it runs binaries built HERE and carried (no LibTorch tests, no
# Python package). Then it collects results, logs and recorded snapshots in one folder. Steps:
# every gpu test in its own process (the LibTorch ones included), two injection smoke runs
# (the gpu test binary, a torch program) with their snapshots checked, the CLI on the
# injection's snapshot, the server debug flag's smokes where the graphcheck package imports;
# then the benchmarks: GPU graphs, the CUPTI capture overhead on the reference model with and
# without graphcheck in interleaved pairs, the CPU callback path, the watch's capture cost.
#
# The whole run keeps to a time budget (a CI job or a rented GPU has minutes), the build
# included: every step runs under `timeout` with its own limit, never past the budget, and a
# step that finds too little left is skipped and says so. Results are packed after every
# step, so a run cut short still hands back what it finished.
#
# Usage: OUT=<folder> scripts/gpu-check.sh      (docs/gpu-check.md)
# Environment:
#   OUT                 where the results go: SUMMARY.txt, gpu-check-results.tar.gz (the
#                       results folder, refreshed after every step) and cupti_overhead.json.
#                       Unset: the results stay in the results folder only.
#   GPU_CHECK_CARRY     the staged folder (default: <checkout>/gpu-carry)
#   GPU_CHECK_MODE      build-there or binaries (default: the carry's, its MANIFEST.txt's mode)
#   GPU_CHECK_WORK      build-there: where the source, the prefix, the build and the package
#                       go (default: /tmp/graphcheck-gpu-build; kept, so a rerun is incremental)
#   GPU_CHECK_JOBS      build-there: build jobs (default: nproc)
#   GPU_CHECK_CMAKE_ARGS  build-there: more configure arguments (words)
#   GPU_CHECK_BUILD_LIMIT_S  build-there: the C++ build's limit (default: 210 s)
#   GPU_CHECK_RESULTS   the results folder (default: /tmp/graphcheck-gpu-check)
#   GPU_CHECK_BUDGET_S  time budget in seconds, the build included (default: 340, under 6
#                       minutes; the check ends within about 20 s after it). Steps the budget
#                       leaves no time for are SKIP lines, the last ones first (the overhead
#                       pairs, the watch's capture cost): 385 fits a 420 s command
#   GPU_CHECK_PYTHON    the Python of the torch steps, and of the build there (default: the
#                       bootstrap's venv when it exists there, else python3)
#   GPU_CHECK_TORCH_TESTS  binaries mode: a graphcheck_gpu_reference_model_test built against
#                       that Python's torch, when one is there (a build there makes its own)
# Exit status: 0 when every step passed, else 1. On a machine with a GPU (nvidia-smi lists a
# device, or /dev/nvidia0 exists) a skipped gpu test or smoke is a failure: the point of the
# run is the GPU path. Without a GPU (a dry run) skips are expected and noted.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${GPU_CHECK_CARRY:-${root}/gpu-carry}"
results="${GPU_CHECK_RESULTS:-/tmp/graphcheck-gpu-check}"
work="${GPU_CHECK_WORK:-/tmp/graphcheck-gpu-build}"
budget="${GPU_CHECK_BUDGET_S:-340}"
deadline=$((SECONDS + budget))
rm -rf "${results}"
mkdir -p "${results}/logs" "${results}/snapshots" "${results}/bench" "${results}/gtest"
summary="${results}/SUMMARY.txt"
: > "${summary}"
failed=0

note() { echo "gpu-check: [$(date -u +%T)] $*" | tee -a "${summary}"; }

# pack [now]: hands the results to $OUT (written aside first, then renamed, so a run killed
# mid-pack leaves the previous pack whole). The tarball holds one folder, gpu-check/. Between
# steps at most every 20 s (a tarball of the overhead runs' snapshots takes seconds to write,
# and the budget pays for it); `now` at the end and before an early exit. SUMMARY.txt is
# copied every time.
last_pack=-100
pack() {
  [[ -n "${OUT:-}" ]] || return 0
  mkdir -p "${OUT}"
  cp -f "${summary}" "${OUT}/SUMMARY.txt"
  [[ "${1:-}" == now ]] || ((SECONDS - last_pack >= 20)) || return 0
  last_pack="${SECONDS}"
  # The first injected overhead run's files show it attached; the other four pairs' (several
  # MB of snapshots) would only weigh on a tarball that must come back whole.
  tar -czf "${OUT}/.gpu-check-results.tar.gz" -C "$(dirname "${results}")" \
    --exclude='overhead-inject-[2-9]' \
    --transform "s|^$(basename "${results}")|gpu-check|" "$(basename "${results}")" 2>/dev/null &&
    mv -f "${OUT}/.gpu-check-results.tar.gz" "${OUT}/gpu-check-results.tar.gz"
  [[ -f "${results}/bench/cupti_overhead.json" ]] && cp -f "${results}/bench/cupti_overhead.json" "${OUT}/"
  return 0
}

# limited LIMIT LOG COMMAND...: runs COMMAND under `timeout` with at most LIMIT seconds and
# never past the budget, output into logs/LOG; returns its status (124/137: timed out, 125:
# not started, the budget being spent).
limited() {
  local limit="$1" log="$2"
  shift 2
  local left=$((deadline - SECONDS))
  ((left < 15)) && return 125
  ((limit > left)) && limit="${left}"
  timeout --kill-after=10 "${limit}" "$@" > "${results}/logs/${log}" 2>&1
}

# step NAME LOG LIMIT COMMAND...: `limited`, with a PASS/FAIL/SKIP line in SUMMARY.txt.
step() {
  local name="$1" log="$2" limit="$3" start="${SECONDS}" status=0
  shift 3
  echo "gpu-check: == ${name} (at most ${limit} s)"
  limited "${limit}" "${log}" "$@" || status=$?
  case "${status}" in
    0)
      # A smoke that found no CUDA device or no Triton prints "<name>: SKIP (<why>)" and exits 0.
      local skip
      skip="$(grep -m1 -oE ': SKIP \(.*\)' "${results}/logs/${log}" | cut -c3-)"
      if [[ -z "${skip}" ]]; then
        note "PASS ${name} ($((SECONDS - start)) s)"
      elif ((gpu_present)); then
        note "FAIL ${name} skipped on a machine with a GPU: ${skip}"
        failed=1
      else
        note "NOTE ${name}: ${skip} (no GPU found, expected)"
      fi
      ;;
    125) note "SKIP ${name} (time budget spent)"; failed=1 ;;
    124 | 137) note "FAIL ${name} (timed out; see logs/${log})"; failed=1 ;;
    *) note "FAIL ${name} (exit ${status} after $((SECONDS - start)) s; see logs/${log})"; failed=1 ;;
  esac
  pack
  return "${status}"
}

# expect NAME COMMAND...: an assertion on what a step left (no time limit: it reads files).
expect() {
  local name="$1" output status=0
  shift
  output="$("$@" 2>&1)" || status=$?
  if ((status == 0)); then
    note "PASS ${name}: ${output}"
  elif ((gpu_present)); then
    note "FAIL ${name}: ${output}"
    failed=1
  else
    note "NOTE ${name} (no GPU found, expected): ${output}"
  fi
}

# --- 1. environment, then what runs: built there (build-there) or carried (binaries) --------
if [[ ! -f "${carry}/MANIFEST.txt" ]]; then
  note "FAIL no ${carry}/MANIFEST.txt: run scripts/gpu-pack.sh here first and carry gpu-carry"
  pack now
  exit 1
fi
mode="${GPU_CHECK_MODE:-$(sed -n 's/^mode: //p' "${carry}/MANIFEST.txt")}"
mode="${mode:-binaries}"  # a carry packed before the modes holds binaries
python="${GPU_CHECK_PYTHON:-}"
if [[ -z "${python}" ]]; then
  # shellcheck source=scripts/versions.env
  source "${root}/scripts/versions.env"
  venv="${GRAPHCHECK_CACHE:-${HOME:-/root}/.cache/graphcheck}/venv-torch-${TORCH_VERSION}"
  python="$(command -v python3 || echo python3)"
  [[ -x "${venv}/bin/python" ]] && python="${venv}/bin/python"
fi
python="$(command -v "${python}" || echo "${python}")"  # a path: CMake's Python_EXECUTABLE
gpu_present=0
if { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; } ||
  [[ -e /dev/nvidia0 ]]; then
  gpu_present=1
fi
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -a), $(nproc) cores"
  echo "checkout: ${root} ($(git -C "${root}" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  head -6 "${carry}/MANIFEST.txt"
  command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"
  echo "python: ${python}"
  "${python}" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
  for tool in cmake ninja nvcc c++; do echo "${tool}: $("${tool}" --version 2>&1 | grep -m1 -E '[0-9]+\.[0-9]+')"; done
} > "${results}/environment.txt" 2>&1
note "mode ${mode}, carry ${carry}, budget ${budget} s, torch steps with ${python}"
if ((gpu_present)); then
  note "device: GPU present; a skipped gpu test or smoke fails the check"
else
  note "device: no GPU found (no device in nvidia-smi -L, no /dev/nvidia0): dry run, gpu tests and smokes are expected to skip"
fi

case "${mode}" in
  build-there)
    # The C++ build first: without it nothing below can run. The package's install after it
    # needs only its modules; a failed install still leaves the C++ steps to run.
    # A build whose CUDA programs were made but not the torch-linked ones (exit 3: a
    # LibTorch the code has not met) leaves the rest to run: a FAIL line, and on.
    build_status=0
    step "build there: the gpu tier, the LibTorch gpu tests, benchmarks, CLI, injection, modules" \
      build-cxx.log "${GPU_CHECK_BUILD_LIMIT_S:-210}" "${root}/scripts/gpu-build.sh" cxx "${carry}" "${work}" "${python}" ||
      build_status=$?
    while read -r line; do note "FAIL ${line#gpu-build: FAIL }"; done \
      < <(grep -E '^gpu-build: FAIL ' "${results}/logs/build-cxx.log")
    # Stopped by its limit after the first round (the gpu tier and the injection library,
    # gpu-build.sh): the programs it made in this run still run, as with exit status 3.
    if ((build_status == 124 || build_status == 137)) &&
      [[ "${work}/build/bin/graphcheck_gpu_tests" -nt "${results}/environment.txt" ]]; then
      note "FAIL the build ran past its limit (GPU_CHECK_BUILD_LIMIT_S); the check goes on with what it made"
      build_status=3
    fi
    if ((build_status != 0 && build_status != 3)); then
      cp -f "${work}/build/CMakeFiles/CMakeError.log" "${work}/build/CMakeFiles/CMakeConfigureLog.yaml" \
        "${results}/logs/" 2>/dev/null
      note "FAIL nothing to run without the build; see logs/build-cxx.log"
      pack now
      exit 1
    fi
    # What the build proved about its dependencies (gpu-build.sh verify_prefix).
    while read -r line; do note "NOTE ${line#gpu-build: }"; done \
      < <(grep -E '^gpu-build: (CMake packages|headers|graphcheck[a-z_]* loads)' "${results}/logs/build-cxx.log")
    bin="${work}/build/bin"
    inject_lib="${work}/build/lib/libgraphcheck_inject.so"
    GPU_CHECK_TORCH_TESTS="${bin}/graphcheck_gpu_reference_model_test"
    # The Python scripts in one folder (bench_watch.py imports bench_capture.py beside it).
    scripts="${work}/scripts"
    rm -rf "${scripts}" && mkdir -p "${scripts}"
    cp "${work}"/src/tests/gpu/*.py "${work}/src/bench/python/bench_watch.py" \
      "${work}/src/bench/python/bench_capture.py" "${scripts}/"
    if step "build there: the Python package (pip install --target, no network)" build-python.log 90 \
      "${root}/scripts/gpu-build.sh" python "${carry}" "${work}" "${python}"; then
      export PYTHONPATH="${work}/site${PYTHONPATH:+:${PYTHONPATH}}"
    fi
    ;;
  binaries)
    bin="${carry}/bin"
    inject_lib="${carry}/lib/libgraphcheck_inject.so"
    scripts="${carry}/scripts"
    ;;
  *)
    note "FAIL GPU_CHECK_MODE '${mode}': expected build-there or binaries"
    pack now
    exit 1
    ;;
esac
# One probe of this Python for every later step (each cold `import torch` costs seconds of the
# budget): torch, then the package (graphcheck._torch links libtorch_python, which `import
# torch` loads: torch first), then its reference model.
probe="$("${python}" - <<'PY' 2>&1
import torch
print("torch", torch.__version__)
import graphcheck
import graphcheck._torch
print("package", graphcheck.__file__)
import graphcheck.reference
print("reference model")
PY
)"
has_torch=0 has_package=0 has_reference=0
grep -q '^torch ' <<< "${probe}" && has_torch=1
grep -q '^package ' <<< "${probe}" && has_package=1
grep -q '^reference model$' <<< "${probe}" && has_reference=1
{
  echo "== probe of ${python}"
  echo "${probe}" | tail -n 4
  for file in "${bin}"/* "${inject_lib}" "${carry}"/lib/*.so*; do
    [[ -f "${file}" ]] && { echo "== ldd ${file##*/}"; ldd "${file}"; }
  done
} >> "${results}/environment.txt" 2>&1
# The ldd sections close environment.txt.
if grep -q 'not found' < <(sed -n '/^== ldd/,$p' "${results}/environment.txt"); then
  note "FAIL a program to run misses a library here (see environment.txt)"
  failed=1
fi

# --- 2. the gpu tests, one process each (a fault poisons only its own context) ------------
export GRAPHCHECK_GPU_OUT="${results}/snapshots"
mapfile -t tests < <("${bin}/graphcheck_gpu_tests" --gtest_list_tests 2>/dev/null |
  awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
[[ -n "${GPU_CHECK_TORCH_TESTS:-}" && -x "${GPU_CHECK_TORCH_TESTS}" ]] || GPU_CHECK_TORCH_TESTS=""
passed=0 skipped=0 unrun=0 total=0
run_gpu_test() {  # run_gpu_test BINARY TEST
  local binary="$1" test="$2" start="${SECONDS}" status=0 xml="${results}/gtest/$2.xml"
  total=$((total + 1))
  limited 60 "gtest-${test}.log" "${binary}" --gtest_filter="${test}" --gtest_output="xml:${xml}" ||
    status=$?
  if ((status == 0)) && grep -q 'result="skipped"' "${xml}" 2>/dev/null; then
    skipped=$((skipped + 1))
    local why
    why="$(grep -m1 -o 'message="[^"]*"' "${xml}" | head -c 200)"
    if ((gpu_present)); then
      note "FAIL ${test} skipped on a machine with a GPU: ${why}"
      failed=1
    else
      echo "gpu-check: skip ${test}: ${why}"
    fi
  elif ((status == 0)); then
    passed=$((passed + 1))
    note "PASS ${test} ($((SECONDS - start)) s)"
  elif ((status == 125)); then
    note "SKIP ${test} (time budget spent)"
    unrun=$((unrun + 1))
    failed=1
  elif ((status == 124 || status == 137)); then
    note "FAIL ${test} (timed out; see logs/gtest-${test}.log)"
    failed=1
  else
    note "FAIL ${test} (exit ${status} after $((SECONDS - start)) s; see logs/gtest-${test}.log)"
    failed=1
  fi
}
for test in "${tests[@]}"; do
  run_gpu_test "${bin}/graphcheck_gpu_tests" "${test}"
done
if [[ -n "${GPU_CHECK_TORCH_TESTS}" ]]; then
  mapfile -t torch_tests < <("${GPU_CHECK_TORCH_TESTS}" --gtest_list_tests 2>/dev/null |
    awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}')
  for test in "${torch_tests[@]}"; do
    run_gpu_test "${GPU_CHECK_TORCH_TESTS}" "${test}"
  done
  if ((${#torch_tests[@]} == 0)); then
    note "FAIL no gpu tests listed by ${GPU_CHECK_TORCH_TESTS} (run it with --gtest_list_tests to see why)"
    failed=1
  fi
elif [[ "${mode}" == build-there ]]; then
  note "FAIL the build there made no ${bin}/graphcheck_gpu_reference_model_test"
  failed=1
elif ((gpu_present)); then
  # On a GPU the tier is the whole tier: a run without its LibTorch tests did not pass it.
  note "FAIL torch-linked gpu tests not run on a machine with a GPU (GpuReferenceModelTest.*, GpuTorchGraphTest.*): carried binaries have no LibTorch build; carry the source (the default mode) or set GPU_CHECK_TORCH_TESTS"
  failed=1
else
  note "NOTE torch-linked gpu tests not run (GpuReferenceModelTest.*, GpuTorchGraphTest.*): they need LibTorch ${TORCH_VERSION:-2.13}, not carried; set GPU_CHECK_TORCH_TESTS where one is built"
fi
if ((total == 0)); then
  note "FAIL no gpu tests listed by ${bin}/graphcheck_gpu_tests"
  failed=1
elif ((gpu_present == 0 && skipped > 0)); then
  note "NOTE gpu tests skipped (${skipped} of ${total}; no GPU found): the GPU path is still unverified"
fi
unrun_text=""
((unrun == 0)) || unrun_text=", ${unrun} not run (time budget)"
note "gpu tests: ${passed} passed, ${skipped} skipped, $((total - passed - skipped - unrun)) failed${unrun_text} of ${total}"
pack

# --- 3. injection smoke runs: the library attaches and finds the expected graphs -----------
# The gpu test binary under CUDA_INJECTION64_PATH: PlainKernel sees the injection hold CUPTI,
# runs its one-kernel graph and leaves it alive, so the exit snapshot must hold exactly that
# graph (the test itself skips by design here).
mkdir -p "${results}/inject"
step "injection smoke run (gpu test binary)" inject.log 60 env CUDA_INJECTION64_PATH="${inject_lib}" \
  GRAPHCHECK_CHECK=exit GRAPHCHECK_POLICY=warn GRAPHCHECK_OUT="${results}/inject" \
  "${bin}/graphcheck_gpu_tests" --gtest_filter='*PlainKernel*'
expect "injection attached and found the struct_kernel graph" python3 \
  "${scripts}/check_inject_snapshots.py" "${results}/inject" --tag exit --graphs 1 --kernel struct_kernel
snapshot="$(find "${results}/inject" -name '*-exit-snapshot.json' -print -quit)"
if [[ -n "${snapshot}" ]]; then
  # The CLI reads what the library wrote (exit 1: findings, expected without a registry).
  limited 30 cli-check.log "${bin}/graphcheck" check "${snapshot}"
  status=$?
  if ((status <= 1)); then note "PASS the CLI checks the injection's snapshot (exit ${status})"; else
    note "FAIL the CLI on the injection's snapshot (exit ${status}; see logs/cli-check.log)"; failed=1; fi
fi

# A torch program (torch.cuda.graph) under GRAPHCHECK_CHECK=launch: with no registry its
# tensors read unregistered, so the first replay writes a launch snapshot holding the graph.
if ((has_torch)); then
  mkdir -p "${results}/inject-torch"
  step "injection smoke run (torch)" inject-torch.log 90 env CUDA_INJECTION64_PATH="${inject_lib}" \
    GRAPHCHECK_CHECK=launch GRAPHCHECK_POLICY=warn GRAPHCHECK_OUT="${results}/inject-torch" \
    "${python}" "${scripts}/inject_torch_smoke.py"
  expect "injection found torch's graph at its launch" python3 "${scripts}/check_inject_snapshots.py" \
    "${results}/inject-torch" --tag launch --graphs 1 --at-least
  # Whether the exit check still sees it after Python's finalization ([verify]): recorded.
  note "NOTE torch injection at exit: $(python3 "${scripts}/check_inject_snapshots.py" \
    "${results}/inject-torch" --tag exit --graphs 1 --at-least 2>&1)"
  # The exit check of a graph destroyed before exit (issue 18): it must be in the exit
  # report, checked when its exec graph was destroyed; 0 graphs means the check missed it.
  mkdir -p "${results}/inject-torch-exit"
  step "injection exit check of a destroyed graph (torch)" inject-torch-exit.log 90 \
    env CUDA_INJECTION64_PATH="${inject_lib}" GRAPHCHECK_CHECK=exit GRAPHCHECK_POLICY=warn \
    GRAPHCHECK_OUT="${results}/inject-torch-exit" \
    "${python}" "${scripts}/inject_torch_smoke.py" --destroy-graph
  expect "the exit report holds the destroyed graph" \
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
  note "SKIP injection smoke run (torch): ${python} has no torch"
  ((gpu_present)) && failed=1
fi

# --- 4. the server debug flag: needs the graphcheck package for this Python ------------------
# Before the benchmarks: what the flag finds matters more than what it costs, should the
# budget run out. torch first: graphcheck._torch links libtorch_python, which `import torch`
# loads.
if ((has_package)); then
  for variant in legacy registered; do
    step "watch smoke (${variant})" "watch-smoke-${variant}.log" 60 \
      "${python}" "${scripts}/watch_smoke.py" --variant "${variant}" --out "${results}/watch"
  done
  # The graph's own nodes (issue 18 §1): a cudaMemsetAsync the dispatcher never sees.
  step "watch reader smoke" watch-reader-smoke.log 60 \
    "${python}" "${scripts}/watch_reader_smoke.py" --out "${results}/watch"
  # Kernels the dispatcher never sees (issue 29 §1): a Triton kernel and a torch.compile'd
  # forward inside torch.cuda.graph, reading plain attributes beside registered tensors.
  step "watch Triton and compile smoke" watch-triton-smoke.log 120 \
    "${python}" "${scripts}/watch_triton_smoke.py" --out "${results}/watch"
elif [[ "${mode}" == build-there ]]; then
  note "FAIL watch smokes not run: ${python} cannot import graphcheck._torch from the build there (see logs/build-python.log)"
  failed=1
else
  note "NOTE watch smoke not run: ${python} cannot import graphcheck._torch (carried binaries: the package is built for the pinned torch); the CUDA path of GRAPHCHECK=1 stays unverified"
fi

# --- 5. benchmarks ----------------------------------------------------------------------
step "gpu benchmarks (100/1,000/10,000-node graphs, interleaved plain/graphcheck pairs)" \
  gpu-bench.log 90 "${bin}/graphcheck_gpu_bench" \
  --benchmark_out="${results}/bench/gpu_bench.json" --benchmark_out_format=json
# Each pair benchmark's figures in SUMMARY.txt (issue 32 §3: per node at 100, 1,000 and 10,000
# nodes), not only in the tarball.
bench_lines() {
  python3 - "${results}/bench/gpu_bench.json" <<'PY'
import json, sys
try:
    benchmarks = json.load(open(sys.argv[1])).get("benchmarks", [])
except (OSError, ValueError) as exc:
    sys.exit(f"no gpu benchmark figures: {exc}")
for b in benchmarks:
    if b.get("error_occurred") or "plain_median" not in b:
        continue
    unit = "us per node" if b["name"].startswith("capture_pairs") else "us"
    print(
        f"{b['name']}: median {b['plain_median']:.3f} plain, {b['graphcheck_median']:.3f} with "
        f"graphcheck {unit} (added {b['added']:+.3f}; min {b['plain_min']:.3f} / "
        f"{b['graphcheck_min']:.3f}; spread {b['plain_spread']:.3f} / "
        f"{b['graphcheck_spread']:.3f}; {int(b['pairs'])} pairs)"
    )
PY
}
if ((gpu_present)); then
  while read -r line; do note "NOTE ${line}"; done < <(bench_lines 2>&1)
fi
if grep -q '"error_occurred": true' "${results}/bench/gpu_bench.json" 2>/dev/null; then
  if ((gpu_present)); then
    note "FAIL gpu benchmarks reported errors on a machine with a GPU; see logs/gpu-bench.log"
    failed=1
  else
    note "NOTE gpu benchmarks reported errors (no GPU found); see logs/gpu-bench.log"
  fi
fi

# The capture overhead on the reference model: pairs of processes, plain and injected,
# interleaved, every run on the same model (the comparison refuses different ones).
if ((!gpu_present)); then
  note "NOTE capture overhead not run (no GPU found, expected)"
elif ((has_torch)); then
  overhead="${results}/bench"
  model=decoder
  ((has_reference)) && model=reference
  plain_runs=()
  checked_runs=()
  pair_s=0
  overhead_run() {  # overhead_run plain|graphcheck PAIR
    local side="$1" pair="$2" injection=()
    if [[ "${side}" == graphcheck ]]; then
      mkdir -p "${overhead}/overhead-inject-${pair}"
      injection=(CUDA_INJECTION64_PATH="${inject_lib}" GRAPHCHECK_CHECK=exit
        GRAPHCHECK_POLICY=warn GRAPHCHECK_OUT="${overhead}/overhead-inject-${pair}")
    fi
    step "capture overhead, ${side} (${model}, pair ${pair})" "overhead-${side}-${pair}.log" 60 \
      env "${injection[@]}" "${python}" "${scripts}/cupti_overhead_bench.py" --model "${model}" \
      --out "${overhead}/overhead-${side}-${pair}.json"
  }
  for pair in 1 2 3 4 5; do
    # After 3 whole pairs (the least a comparison takes), a pair starts only with 1.2 times
    # the last one's time left: a pair cut short by the budget measures nothing.
    if ((pair > 3 && deadline - SECONDS < pair_s * 12 / 10 + 15)); then
      note "NOTE overhead pairs stopped after $((pair - 1)) (time budget: the last took ${pair_s} s)"
      break
    fi
    pair_start="${SECONDS}"
    # Alternating which side runs first: what one run leaves (clocks, caches, the injected
    # run's files) falls on both sides alike.
    if ((pair % 2)); then order=(plain graphcheck); else order=(graphcheck plain); fi
    for side in "${order[@]}"; do overhead_run "${side}" "${pair}"; done
    pair_s=$((SECONDS - pair_start))
    # Python's finalization destroys torch's graphs before the exit check: the injection
    # checks each as it is destroyed, so a run it was attached to (subscribed, not only
    # loaded: one that switched itself off stays mapped) leaves destroy-time snapshots.
    attached=0
    python3 "${scripts}/check_inject_snapshots.py" "${overhead}/overhead-inject-${pair}" \
      --tag destroy --graphs 1 --at-least > "${results}/logs/overhead-attached-${pair}.log" 2>&1 &&
      attached=1
    # Only whole pairs are compared; a pair cut short (the budget, a crash) is named, not
    # allowed to lose the others.
    if [[ ! -f "${overhead}/overhead-plain-${pair}.json" ||
      ! -f "${overhead}/overhead-graphcheck-${pair}.json" ]]; then
      note "NOTE overhead pair ${pair} incomplete: left out of the comparison"
    elif ((!attached)); then
      note "FAIL overhead pair ${pair}: the injection left no destroy snapshot (not attached): $(tail -1 "${results}/logs/overhead-attached-${pair}.log")"
      failed=1
    else
      plain_runs+=("${overhead}/overhead-plain-${pair}.json")
      checked_runs+=("${overhead}/overhead-graphcheck-${pair}.json")
    fi
  done
  if ((${#plain_runs[@]} == 0)); then
    note "FAIL capture overhead: no whole pair to compare (see logs/overhead-*.log)"
    failed=1
  elif "${python}" "${scripts}/cupti_overhead_bench.py" --out "${overhead}/cupti_overhead.json" \
      --plain "${plain_runs[@]}" --graphcheck "${checked_runs[@]}" \
      > "${results}/logs/overhead-compare.log" 2>&1; then
    note "NOTE $(tail -1 "${results}/logs/overhead-compare.log")"
  else
    note "FAIL $(tail -1 "${results}/logs/overhead-compare.log")"
    ((gpu_present)) && failed=1
  fi
else
  note "SKIP capture overhead: ${python} has no torch"
  ((gpu_present)) && failed=1
fi

# The watch's cost on real torch.cuda.graph captures (issue 32 §2): plain and watched
# captures of the reference model in the same rounds, the first and the later ones, in the
# engine flow, with a check at each capture, and with files; targets +10 ms and +5%/+1 ms.
if ((!gpu_present)); then
  note "NOTE watch capture overhead not run (no GPU found, expected)"
elif ((!has_package)); then
  note "FAIL watch capture overhead not run: ${python} cannot import graphcheck._torch"
  failed=1
elif ((deadline - SECONDS < 60)); then
  # bench_watch.py prints when every round is done: a run cut short says nothing.
  note "SKIP watch capture overhead (time budget: $((deadline - SECONDS)) s left, 60 s needed)"
  failed=1
elif step "watch capture overhead (CUDA)" watch-overhead.log 120 \
    "${python}" "${scripts}/bench_watch.py" --device cuda --only twin --hidden 1024 \
    --repeat "$((deadline - SECONDS >= 120 ? 5 : 3))" --later 6; then
  note "NOTE $(grep -E 'engine flow|check at capture' "${results}/logs/watch-overhead.log" | tr -s ' ' | paste -sd ';')"
fi

note "done in ${SECONDS} s; results in ${results}${OUT:+, packed into ${OUT}/gpu-check-results.tar.gz}"
pack now
exit "${failed}"
