# Thin wrapper around meson. `make demo` and `make check` install missing Debian packages
# first (scripts/deps), so both work on a fresh Debian 12 machine.
BUILD   ?= build
MESON   ?= meson
SETUP   ?=
WERROR  ?= $(if $(CI),-Dwerror=true,)

.PHONY: all deps demo check oldroot bench fuzz clean format tidy
all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

deps:
	@scripts/deps --check >/dev/null 2>&1 || scripts/deps

$(BUILD)/build.ninja:
	@scripts/deps --check >/dev/null 2>&1 || scripts/deps
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

bench: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	bench/run $(BUILD)

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
