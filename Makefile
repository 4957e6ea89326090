# The two commands a user needs: `make demo` and `make test` (`make fuzz` for the fuzzers).
# Both install missing Debian packages first, then build Release into build/: `make demo`
# builds only the fgm binary, `make test` everything. `make python` builds the Python module and
# installs the package fgm into .venv/ (docs/python.md).
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
DEMO_DIR ?= demo-out
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
# Debian's Python (its numpy, scipy and scikit-learn), not whatever python3 is first on PATH.
PYTHON ?= /usr/bin/python3
VENV ?= .venv

.PHONY: all deps configure build fgm python test demo bench fuzz clean

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

# The extension and the package copy in $(BUILD_DIR)/python, installed into a virtual environment
# that sees Debian's site-packages; offline (no index, no build isolation).
python: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target fgm_python
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv --system-site-packages $(VENV)
	@$(VENV)/bin/python -m pip install -q --no-build-isolation --no-index --no-deps --force-reinstall $(BUILD_DIR)/python
	@$(VENV)/bin/python -c "import fgm; print('fgm', fgm.__version__, 'installed in $(VENV)')"

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
	rm -rf $(BUILD_DIR) $(DEMO_DIR) $(FUZZ_BUILD_DIR) $(VENV)
