# The two Quick start commands. `make run` runs the main job; `make test` builds the release
# and the sanitizer configurations and runs every test tier. Both bootstrap first.
SHELL := /bin/bash
.DEFAULT_GOAL := run
.PHONY: run example test bootstrap configure build build-asan lint bench clean

VENV = $(shell scripts/bootstrap.sh | tail -n 1)
JOBS ?= $(shell nproc)

bootstrap:
	@scripts/bootstrap.sh >/dev/null

configure: bootstrap
	@cmake --preset release -DGRAPHCHECK_TORCH_VENV=$(VENV) >/dev/null

build: configure
	cmake --build --preset release -j $(JOBS)

build-asan: bootstrap
	@cmake --preset asan -DGRAPHCHECK_TORCH_VENV=$(VENV) >/dev/null
	cmake --build --preset asan -j $(JOBS)

# The main job: the reference model's capture, sleep, wake and reload story on the CPU, for
# the legacy and the registered variant (snapshots and summary.json in build/demo).
run: build
	build/bin/graphcheck demo --out build/demo

# The core on its own: the synthetic decode step (findings exit 1 by design).
example: build
	@build/bin/graphcheck check tests/data/decode_step.json; rc=$$?; \
	  if [ $$rc -gt 1 ]; then exit $$rc; fi

lint: configure
	scripts/lint.sh build

test: build build-asan
	ctest --preset release
	ctest --preset asan
	scripts/lint.sh build

bench: build
	build/bin/graphcheck_bench
	build/bin/graphcheck_torch_bench
	build/bin/graphcheck_cupti_bench

clean:
	rm -rf build build-asan build-debug
