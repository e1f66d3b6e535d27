# The two commands of the README. Each does all set-up on a fresh Debian 12 machine.
JOBS ?= $(shell nproc)
# Seconds each libFuzzer target runs in `make fuzz` (`make fuzz-smoke` runs a few).
FUZZ_SECONDS ?= 60

.PHONY: deps build test demo demo-torch asan fuzz fuzz-build fuzz-smoke format clean

deps:
	bash scripts/install-deps.sh

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

# The whole suite, then the short fuzz run of every parser (clang's libFuzzer; build-fuzz/), and
# the time of each phase (scripts/test.sh).
test:
	JOBS=$(JOBS) bash scripts/test.sh

demo: build
	bash scripts/demo.sh

# The same kind of run through PyTorch (infinipipe.torch), then its report.
demo-torch: build
	bash scripts/demo_torch.sh

asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS) --timeout 1200

# libFuzzer targets (fuzz/, docs/reliability.md): clang, ASan + UBSan, in build-fuzz/.
fuzz-build: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j $(JOBS)

fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

# What every test run affords (`make test` runs the same): each target over its seeds and saved
# reproducers, then 20000 inputs each from seed 1 (bounded by count, not time; a few seconds per
# target).
fuzz-smoke: fuzz-build
	ctest --test-dir build-fuzz -L fuzz --output-on-failure
	FUZZ_RUNS=20000 bash scripts/fuzz.sh

format:
	find src tests bench fuzz -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf build build-asan build-fuzz
