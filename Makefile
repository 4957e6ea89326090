# The two commands a user needs: `make demo` and `make test`.
# Both install missing Debian packages first, then build Release into build/.
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
DEMO_DIR ?= demo-out

.PHONY: all deps configure build test demo bench clean

all: build

deps:
	@bash scripts/install_deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)/fgm $(DEMO_DIR)

bench: build
	@bash bench/run_all.sh $(BUILD_DIR)/fgm

clean:
	rm -rf $(BUILD_DIR) $(DEMO_DIR)
