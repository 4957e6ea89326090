# The two commands a user needs: `make demo` and `make test` (`make fuzz` for the fuzzers).
# Both install missing Debian packages first, then build Release into build/: `make demo`
# builds only the fgm binary, `make test` everything.
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
DEMO_DIR ?= demo-out
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60

.PHONY: all deps configure build fgm test demo bench fuzz clean

all: build

deps:
	@bash scripts/install_deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Only the fgm binary, what `make demo` runs (the test suite and the benchmark binaries are not built).
fgm: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target fgm

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: fgm
	@bash scripts/demo.sh $(BUILD_DIR)/fgm $(DEMO_DIR)

bench: build
	@bash bench/run_all.sh $(BUILD_DIR)/fgm

# libFuzzer harnesses (clang, ASan + UBSan) in their own build dir, each run for
# FUZZ_SECONDS; fails on any finding. See fuzz/run_fuzzers.sh and RELIABILITY.md.
fuzz: deps
	@bash fuzz/run_fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD_DIR) $(DEMO_DIR) $(FUZZ_BUILD_DIR)
