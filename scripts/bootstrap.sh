#!/usr/bin/env bash
# Installs what graphcheck needs, idempotently: Debian's -dev packages when missing, and a
# pinned torch (LibTorch for the adapter), pybind11 and scikit-build-core (the Python
# package's build), pytest and ruff (the Python tier), transformers and tqdm (the zoo), starlette
# and uvicorn (the example server) in a virtual environment kept in a cache outside the clone,
# so CI on the same machine reuses it. The Makefile installs the package
# `graphcheck` itself into that environment after each build.
# Prints the torch virtual environment's path on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

missing=()
for p in $DEBIAN_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
fi

cache=${GRAPHCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/graphcheck}
venv="$cache/venv-torch-$TORCH_VERSION"
stamp="$venv/.graphcheck-ready-$TORCH_VERSION-$NUMPY_VERSION-$PYTEST_VERSION-$PYBIND11_VERSION-$SCIKIT_BUILD_CORE_VERSION-$RUFF_VERSION-$TRANSFORMERS_VERSION-$TQDM_VERSION-$STARLETTE_VERSION-$UVICORN_VERSION"
if [ ! -f "$stamp" ]; then
  mkdir -p "$cache"
  # Clones on one machine share the cache: one installs while the others wait.
  exec 9>"$cache/.bootstrap.lock"
  flock 9
  if [ ! -f "$stamp" ]; then
    echo "bootstrap: installing torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION and the Python tools into $venv (once per machine)" >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q "torch==$TORCH_VERSION" "numpy==$NUMPY_VERSION" "pytest==$PYTEST_VERSION" \
      "pybind11==$PYBIND11_VERSION" "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION" "ruff==$RUFF_VERSION" \
      "transformers==$TRANSFORMERS_VERSION" "tqdm==$TQDM_VERSION" \
      "starlette==$STARLETTE_VERSION" "uvicorn==$UVICORN_VERSION" >&2
    rm -f "$venv"/.graphcheck-ready-*
    touch "$stamp"
  fi
  exec 9>&-
fi
echo "$venv"
