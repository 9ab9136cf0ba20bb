# The two Quick start commands. `make run` runs the main job; `make test` builds the release
# and the sanitizer configurations and runs every test tier. Both bootstrap first, and both
# leave the Python package `graphcheck` installed in the bootstrap's environment.
SHELL := /bin/bash
.DEFAULT_GOAL := run
.PHONY: run example test bootstrap configure build build-asan lint fuzz bench zoo vllm-zoo screenshots clean

VENV = $(shell scripts/bootstrap.sh | tail -n 1)
JOBS ?= $(shell nproc)
# The compiler cache (cmake/GraphcheckCcache.cmake) lives beside the bootstrap's environments, so
# a fresh clone on this machine compiles only what changed. `make test CCACHE=off` goes without.
CCACHE ?= on
CONFIGURE_ARGS = venv=$(VENV); args=(-DGRAPHCHECK_TORCH_VENV="$$venv" \
  -DGRAPHCHECK_CCACHE_DIR=$(if $(filter on,$(CCACHE)),"$$(dirname "$$venv")/ccache"))

bootstrap:
	@scripts/bootstrap.sh >/dev/null

configure: bootstrap
	@$(CONFIGURE_ARGS); cmake --preset release "$${args[@]}" >/dev/null

# The release build also compiles the Python package's modules (python/); pip then installs the
# package into the bootstrap's environment from those, without compiling again, and is skipped
# when that environment already holds them (cmake/GraphcheckPythonInstall.cmake).
build: configure
	cmake --build --preset release -j $(JOBS)
	@cmake -DPYTHON=$(VENV)/bin/python -DBUILD_DIR=build -P cmake/GraphcheckPythonInstall.cmake

build-asan: bootstrap
	@$(CONFIGURE_ARGS); cmake --preset asan "$${args[@]}" >/dev/null
	cmake --build --preset asan -j $(JOBS)

# The main job: the reference model's capture, sleep, wake and reload story on the CPU, for
# the legacy and the registered variant (snapshots and summary.json in build/demo).
# Then the zoo's fixed subset of transformers architectures (docs/zoo.md) against its
# baseline allowlist. From build/, so that the repository's C++ graphcheck/ folder does not
# shadow the installed package.
run: build
	build/bin/graphcheck demo --out build/demo
	cd build && $(VENV)/bin/python -m graphcheck.zoo --subset --baseline --no-progress

# The core on its own: the synthetic decode step (findings exit 1 by design).
example: build
	@build/bin/graphcheck check tests/data/decode_step.json; rc=$$?; \
	  if [ $$rc -gt 1 ]; then exit $$rc; fi

lint: configure
	scripts/lint.sh build

# The fuzz targets (tests/fuzz/README.md) under libFuzzer with ASan and UBSan, FUZZ_SECONDS
# each, from their committed corpora (tests/data/fuzz/); new inputs go to build-fuzz/corpus/,
# an input that breaks a promise to build-fuzz/crashes/. Not part of `make test`, whose unit
# tier replays the committed corpora.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/bootstrap.sh fuzz
	@cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	@rc=0; mkdir -p build-fuzz/crashes; for t in snapshot report allowlist watch; do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  build-fuzz/bin/graphcheck_fuzz_$$t -dict=tests/fuzz/json.dict -max_len=8192 -timeout=10 \
	    -rss_limit_mb=3072 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/crashes/$$t- build-fuzz/corpus/$$t tests/data/fuzz/$$t \
	    || rc=1; \
	done; exit $$rc

# Every tier in both configurations and lint, then the table of tiers (scripts/tier_table.py):
# what ran, with its counts and pytest's skips by name, and what was skipped, with the reason
# the configure step recorded. Fails when a test or lint fails or a tier did not run (only the
# gpu tier may skip, on a machine without a GPU); the table is printed either way.
test: build build-asan
	@rc=0; lint=0; \
	ctest --preset release || rc=1; \
	ctest --preset asan || rc=1; \
	scripts/lint.sh build || lint=$$?; \
	$(VENV)/bin/python scripts/tier_table.py --release build --asan build-asan \
	  --lint-status $$lint || rc=1; \
	exit $$rc

# The report screenshots in docs/images: the demo's page (desktop and phone), the H200 run's
# check point page and a watch folder's index.html, in headless Chromium.
screenshots: build
	$(VENV)/bin/python scripts/screenshots.py --cli build/bin/graphcheck \
	  --browser $$(command -v chromium-headless-shell || command -v chromium) \
	  --python $(VENV)/bin/python --work build/screenshots --out docs/images

bench: build
	build/bin/graphcheck_bench
	build/bin/graphcheck_torch_bench
	build/bin/graphcheck_cupti_bench

# Every architecture the pinned transformers ships and the variants swept from its configs
# (3,168 entries: 18 minutes on this 2-core machine with nothing else running); the
# report as JSON and as a page (build/zoo.json, build/zoo.html).
zoo: build
	cd build && $(VENV)/bin/python -m graphcheck.zoo --jobs $(JOBS) --baseline --json zoo.json \
	  --html zoo.html

# Every architecture vLLM registers, built by vLLM's own engine on the CPU, in the vLLM
# environment (scripts/bootstrap.sh vllm, made on first use; docs/vllm-zoo.md): one pass per
# dtype (VLLM_ZOO_DTYPES), each to its own report (build/vllm-zoo.json and .html for float32,
# build/vllm-zoo-bfloat16.json and .html); every pass runs, and the target fails if one did.
VLLM_ZOO_DTYPES ?= float32 bfloat16
vllm-zoo: build
	@venv=$$(scripts/bootstrap.sh vllm | tail -n 1) && \
	  cmake -DPYTHON=$$venv/bin/python -DBUILD_DIR=build -P cmake/GraphcheckPythonInstall.cmake && \
	  cd build && rc=0 && for dtype in $(VLLM_ZOO_DTYPES); do \
	    out=vllm-zoo$$([ $$dtype = float32 ] || echo -$$dtype); \
	    $$venv/bin/python -m graphcheck.zoo --engine vllm --dtype $$dtype --jobs $(JOBS) \
	      --baseline --json $$out.json --html $$out.html || rc=1; \
	  done; exit $$rc

clean:
	rm -rf build build-asan build-debug build-fuzz
