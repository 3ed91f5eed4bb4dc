# Thin wrapper around CMake. `make demo` and `make test` do all set-up on a
# fresh Debian 12 machine: install missing packages, configure, build, run.

BUILD     ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan fuzz-build fuzz test test-fast demo demo-train demo-lm install clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DDPP_SANITIZE=ON $(CMAKE_FLAGS)

build-asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# libFuzzer targets (tests/fuzz/README.md): clang, ASan+UBSan, -O1; only the
# fuzz targets are built in this tree.
$(FUZZ_BUILD)/CMakeCache.txt: | deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
	    -DDPP_FUZZ=ON -DDPP_SANITIZE=ON -DDPP_TESTS=OFF $(CMAKE_FLAGS)

fuzz-build: deps $(FUZZ_BUILD)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD) --target dpp_fuzz -j $(JOBS)

# Every fuzz target for FUZZ_SECONDS, one after the other; new inputs stay in
# $(FUZZ_BUILD)/fuzz-corpus, crash files go to $(FUZZ_BUILD)/fuzz-crashes.
fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The whole suite twice: optimised, then under ASan+UBSan; then a few seconds
# of each fuzz target (ctest label fuzz, DPP_FUZZ_SECONDS).
# DuckDB from npm (scripts/install-npm-tools.sh, a cache folder outside the
# tree) is the live reference of the Parquet tests; without the registry
# they check the expectations DuckDB computed before (tests/data/).
test: build build-asan
	scripts/install-npm-tools.sh
	cd $(BUILD) && ctest --output-on-failure -j 2
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j 2
	$(MAKE) fuzz-build
	cd $(FUZZ_BUILD)/tests/fuzz && ctest --output-on-failure -L fuzz -j 2

# Only the optimised build, for quick iterations.
test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j 2

# FORMAT=tfrecord or parquet reads the demo table in one format (default both).
demo: build
	DPP_DEMO_FORMAT=$(or $(FORMAT),both) scripts/demo.sh $(BUILD)

# dpp feeding a real (small, CPU) PyTorch trainer: examples/train_dlrm.py.
demo-train: build
	scripts/demo_train.sh $(BUILD)

# A small causal language model trained from a text session (scripts/demo_lm.sh).
demo-lm: build
	scripts/demo_lm.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
