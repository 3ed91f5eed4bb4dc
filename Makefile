# Thin wrapper around CMake. `make demo` and `make test` do all set-up on a
# fresh Debian 12 machine: install missing packages, configure, build, run.

BUILD     ?= build
ASAN_BUILD ?= build-asan
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan test test-fast demo demo-train install clean

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

# The whole suite twice: optimised, then under ASan+UBSan.
test: build build-asan
	cd $(BUILD) && ctest --output-on-failure -j 2
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j 2

# Only the optimised build, for quick iterations.
test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j 2

demo: build
	scripts/demo.sh $(BUILD)

# dpp feeding a real (small, CPU) PyTorch trainer: examples/train_dlrm.py.
demo-train: build
	scripts/demo_train.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
