# The two commands of the README, and a few conveniences. The real build is CMake's.
#   make demo    installs missing packages, builds, tunes the example ops (native candidates, then
#                compiled variants on every device present) and prints their decisions
#   make check   installs missing packages, builds and runs every test: a normal build, an
#                ASan+UBSan build and a TSan build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps build test check check-normal check-asan check-tsan demo bench install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j$(JOBS)

test: build
	ctest --test-dir build --output-on-failure -j$(JOBS)

check-normal: build
	ctest --test-dir build --output-on-failure -j$(JOBS)

check-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKT_SANITIZE=address -DKT_TEST_INSTALL=OFF -DKT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j$(JOBS)
	ctest --test-dir build-asan --output-on-failure -j$(JOBS)

check-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKT_SANITIZE=thread -DKT_TEST_INSTALL=OFF -DKT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-tsan -j$(JOBS)
	ctest --test-dir build-tsan --output-on-failure -j$(JOBS)

# The sanitizer builds come first so that the closing summary is the normal build's.
check: check-asan check-tsan check-normal

demo: build
	./build/examples/matmul_demo
	./build/examples/variants_demo

bench: build
	./build/bench/dispatch

install: build
	cmake --install build

clean:
	rm -rf build build-asan build-tsan
