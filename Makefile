# The two commands of the README, and a few conveniences. The real build is CMake's.
#   make demo    installs missing packages, builds, tunes the example ops (native candidates, then
#                compiled variants on every device present) and prints their decisions
#   make check   installs missing packages, builds and runs every test: a normal build, an
#                ASan+UBSan build, a TSan build and the fuzz harnesses' build (clang)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Tests at once under ctest: two more than the cores, since many tests spend much of their time
# waiting (on worker processes, Redis, Chromium, a deadline) rather than computing (on 2 cores
# the normal build's tests took 121 s with 4 at once, 135-150 s with 3).
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 2 )))
CMAKE_FLAGS ?=

.PHONY: all deps build test check check-normal check-asan check-tsan check-fuzz check-examples fuzz demo bench install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j$(JOBS)

test: build
	ctest --test-dir build --output-on-failure -j$(TEST_JOBS)

# Each stage configures and builds its tree, runs ctest there and prints its wall time and its
# ten slowest tests (scripts/check-stage); `make check` ends with all stages' figures. The
# sanitizer builds compile at -O1 (-g1: line tables, so that their reports name files and lines;
# the build takes a fifth less time than with -g), build only what their tests run, and run the
# tests that prove what they are for (tests/CMakeLists.txt says which).
KT_SANITIZER_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
	-DKT_TEST_INSTALL=OFF -DKT_BUILD_EXAMPLES=OFF

# PoCL's kernel cache for the tests (CMakeLists.txt, KT_TEST_POCL_CACHE): a stage run alone keeps
# its own in its tree's test-env, emptied before its tests; `make check` gives all its stages one
# (build-pocl-cache, emptied before its first stage), since they compile the same OpenCL programs.
KT_POCL_FLAG = -DKT_TEST_POCL_CACHE=$(KT_TEST_POCL)

check-normal: deps
	@scripts/check-stage normal build $(JOBS) $(TEST_JOBS) -DCMAKE_BUILD_TYPE=Release $(KT_POCL_FLAG) $(CMAKE_FLAGS)

check-asan: deps
	@$(if $(KT_TEST_POCL),rm -rf '$(KT_TEST_POCL)';) KT_CHECK_PREBUILD='$(PREBUILD_AFTER_ASAN)' scripts/check-stage asan build-asan $(JOBS) $(TEST_JOBS) $(KT_SANITIZER_FLAGS) -DKT_SANITIZE=address $(KT_POCL_FLAG) $(CMAKE_FLAGS)

check-tsan: deps
	@KT_CHECK_PREBUILD='$(PREBUILD_AFTER_TSAN)' scripts/check-stage tsan build-tsan $(JOBS) $(TEST_JOBS) $(KT_SANITIZER_FLAGS) -DKT_SANITIZE=thread $(KT_POCL_FLAG) $(CMAKE_FLAGS)

# The parsers' libFuzzer harnesses (tests/fuzz/), built by clang with ASan and UBSan: make check
# runs each on its regressions and seeds and fuzzes it 2 s; `make fuzz` fuzzes each for
# FUZZ_SECONDS (default 600) and fails on any finding (scripts/fuzz).
# (line tables only: the reports name files and lines, and the build is quicker than with -g)
KT_FUZZ_FLAGS = -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
	-DKT_TEST_INSTALL=OFF -DKT_BUILD_EXAMPLES=OFF -DKT_BUILD_BENCH=OFF -DKT_BUILD_PYTHON=OFF -DKT_SANITIZE=fuzz
FUZZ_SECONDS ?= 600

check-fuzz: deps
	@KT_CHECK_PREBUILD='$(PREBUILD_AFTER_FUZZ)' scripts/check-stage fuzz build-fuzz $(JOBS) $(TEST_JOBS) -DCMAKE_C_COMPILER=clang $(KT_FUZZ_FLAGS) $(KT_POCL_FLAG) $(CMAKE_FLAGS)

fuzz: deps
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang $(KT_FUZZ_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j$(JOBS)
	@scripts/fuzz -s $(FUZZ_SECONDS) build-fuzz

# The sanitizer builds come first so that the closing summary is the normal build's. Under make
# check each stage builds the next stage's tree beside its own tests (scripts/check-stage,
# KT_CHECK_PREBUILD), so the next stage's "building" figure is what was left of that build.
check: check-asan check-tsan check-fuzz check-normal
	@scripts/check-summary build-asan build-tsan build-fuzz build
check: KT_TEST_POCL = $(CURDIR)/build-pocl-cache
check: PREBUILD_AFTER_ASAN = cmake -S . -B build-tsan $(KT_SANITIZER_FLAGS) -DKT_SANITIZE=thread $(KT_POCL_FLAG) $(CMAKE_FLAGS) >/dev/null && cmake --build build-tsan -j$(JOBS)
check: PREBUILD_AFTER_TSAN = cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang $(KT_FUZZ_FLAGS) $(KT_POCL_FLAG) $(CMAKE_FLAGS) >/dev/null && cmake --build build-fuzz -j$(JOBS)
check: PREBUILD_AFTER_FUZZ = cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(KT_POCL_FLAG) $(CMAKE_FLAGS) >/dev/null && cmake --build build -j$(JOBS)

# Kernel Tuner's OpenCL example scripts through kerntune.tune_kernel on PoCL, all of them: make
# check runs five; this adds matmul.py (a 4096^3 numpy.dot for its answer, then about a minute a
# run on one PoCL thread) and reduction.py (a 3.2 GB input, 16 GB of memory at its peak), about
# 17 minutes in all on a 2-core machine, and convolution.py with two configurations.
check-examples: build
	KT_EXAMPLES_ALL=1 ctest --test-dir build -R '^python-kt-example' --output-on-failure
	KT_EXAMPLES_ALL=1 PYTHONPATH=build/python KERNTUNE_CACHE=off POCL_CACHE_DIR=build/test-env/pocl \
	  KERNTUNE_ARTIFACTS=build/test-env/artifacts \
	  $$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' build/CMakeCache.txt) -m pytest -q -p no:cacheprovider \
	  python/tests/test_kt_examples.py::test_convolution python/tests/test_kt_examples.py::test_matmul \
	  python/tests/test_kt_examples.py::test_reduction

demo: build
	./build/examples/matmul_demo
	./build/examples/variants_demo

bench: build
	./build/bench/dispatch

install: build
	cmake --install build

clean:
	rm -rf build build-asan build-tsan build-fuzz build-pocl-cache
