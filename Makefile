# The two commands of the README. Each does all set-up on a fresh Debian 12 machine.
JOBS ?= $(shell nproc)

.PHONY: deps build test demo asan format clean

deps:
	bash scripts/install-deps.sh

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

test: build
	ctest --preset release -j $(JOBS) --timeout 600

demo: build
	bash scripts/demo.sh

asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS) --timeout 1200

format:
	find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf build build-asan
