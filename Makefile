# Thin wrapper around meson. `make` (`make all`) installs only what the build needs
# (`scripts/deps --build`: compiler, meson, the -dev libraries), never a test tool; `make demo`,
# `make check` and `make bench` install the tests' packages too (`scripts/deps`), so each works
# on a fresh Debian 12 machine.
BUILD   ?= build
MESON   ?= meson
SETUP   ?=
WERROR  ?= $(if $(CI),-Dwerror=true,)

.PHONY: all deps demo check oldroot bench fuzz clean format tidy
all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# The tests' packages. A build directory set up before them (by `make`) is set up again, so
# meson finds what it left out then (cmocka, Go: the unit tests, the emulator and the peers).
deps:
	@scripts/deps --check >/dev/null 2>&1 || { scripts/deps && \
		if [ -f $(BUILD)/build.ninja ]; then $(MESON) setup --reconfigure $(BUILD); fi; }

$(BUILD)/build.ninja:
	@scripts/deps --build --check >/dev/null 2>&1 || scripts/deps --build
	$(MESON) setup $(BUILD) $(WERROR) $(SETUP)

demo: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	scripts/demo $(BUILD)

check: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	$(MESON) test -C $(BUILD) --print-errorlogs $(TESTARGS)

# The interposer in a Debian bullseye root (glibc 2.31): downloads it once into $(BUILD).
oldroot: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	$(MESON) test -C $(BUILD) --print-errorlogs --suite oldroot

# `make bench PEER=/path/to/device-plugin`: the side-by-side with another plugin instead
# (docs/benchmarks.md; PEER_KIND, PEER_ARGS and the BENCH_* variables pass through too).
bench: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	PEER="$(PEER)" bench/run $(BUILD)

fuzz: deps
	scripts/fuzz $(FUZZ_SECONDS)

format:
	clang-format -i $$(git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'fuzz/*.c')

tidy: $(BUILD)/build.ninja
	scripts/tidy $(BUILD)

# The release artifacts of HEAD into $(OUT) (scripts/release, docs/release.md); as root.
OUT ?= dist
.PHONY: release
release: deps
	scripts/release $(OUT)

clean:
	rm -rf $(BUILD)
