# make run: measure this machine's GPUs.  make test: the test suite.  Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ARGS ?=

# The CuPy wheel must match the driver's CUDA major version (nvidia-smi prints "CUDA Version: 13.0").
CUDA_MAJOR := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -n 1)
RUN_EXTRA := $(if $(filter 12,$(CUDA_MAJOR)),cuda12,$(if $(filter 13 14,$(CUDA_MAJOR)),cuda13,))

FLEET_PACKAGES := slurmctld slurmd slurm-client munge
# Consumers' own tools the tests run: promtool (Debian's prometheus package), shellcheck, zsh, whose
# completion system the completion test asks for candidates, bash-completion, through which bash completes the
# command after `trace --` as that command's own completion would, and man-db, whose lexgrog reads the man page's
# NAME as whatis and apropos do; qemu-user and the C library of the other wheel platform, on which the wheel
# test runs that platform's collector.
QEMU_MACHINE := $(if $(filter aarch64,$(shell uname -m)),x86_64,aarch64)
CROSS_LIBC := $(if $(filter aarch64,$(QEMU_MACHINE)),libc6-arm64-cross,libc6-amd64-cross)
BASH_COMPLETION := /usr/share/bash-completion/bash_completion
TOOL_PACKAGES := prometheus shellcheck zsh tmux bash-completion man-db qemu-user $(CROSS_LIBC)

.PHONY: run test demo bench lint clean fleet-deps tool-deps generated docs wheel wheel-tools cuda12-headers

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# setuptools ends an editable install with a boxed note, "Editable installation ... Please be careful with folders
# in your working directory with the same name as your package": here that folder is the package itself, so
# that one note (and no other warning) is silenced.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

# An editable install leaves bisect_smem's own modules without bytecode, and where PYTHONDONTWRITEBYTECODE
# is set (many container images) every run would compile them from source; they are compiled once here,
# as pip compiles a wheel's modules when it installs one.
$(VENV)/.run-installed: pyproject.toml | $(PY)
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e ".$(if $(RUN_EXTRA),[$(RUN_EXTRA)],)"
	$(PY) -m compileall -q bisect_smem
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(PY)
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e ".[test,plot]"
	$(PY) -m compileall -q bisect_smem
	touch $@

run: $(VENV)/.run-installed
	@$(PY) -m bisect_smem $(ARGS)

demo: $(VENV)/.run-installed
	@$(PY) -m bisect_smem --simulate h200 --simulate rtx-pro-6000 $(ARGS)

# The fleet test runs a one-node Slurm cluster; as root with apt, install it, else the test skips. The packages'
# services are not started (tools/apt-install-stopped.sh): the test starts its own cluster and ends it.
fleet-deps:
	@if ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing $(FLEET_PACKAGES) for the Slurm fleet test (their services are not started)"; \
	    sh tools/apt-install-stopped.sh $(FLEET_PACKAGES); \
	  else \
	    echo "note: Slurm is not installed and this is not root with apt: the fleet test will skip"; \
	  fi; \
	fi

# promtool, shellcheck, zsh, tmux, lexgrog and qemu for the tests that run them; as root with apt, install them, else
# those tests skip (on CI they fail). The prometheus package's service is not started (tools/apt-install-stopped.sh).
tool-deps:
	@if ! command -v promtool >/dev/null 2>&1 || ! command -v shellcheck >/dev/null 2>&1 || ! command -v zsh >/dev/null 2>&1 || ! command -v tmux >/dev/null 2>&1 || ! command -v lexgrog >/dev/null 2>&1 || [ ! -f $(BASH_COMPLETION) ] || ! command -v qemu-$(QEMU_MACHINE) >/dev/null 2>&1 || [ ! -d /usr/$(QEMU_MACHINE)-linux-gnu/lib ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing $(TOOL_PACKAGES) for the promtool, shellcheck, zsh, tmux, man page and wheel tests"; \
	    sh tools/apt-install-stopped.sh --no-install-recommends $(TOOL_PACKAGES); \
	  else \
	    echo "note: promtool, shellcheck, zsh, tmux, bash-completion, lexgrog or qemu-$(QEMU_MACHINE) is missing and this is not root with apt: their tests will skip"; \
	  fi; \
	fi

# Rewrite what is generated from the package: the JSON Schemas (from the model), the shell completions
# and the man page (from build_parser()). The test suite fails while any of them is not current.
generated: $(VENV)/.test-installed
	$(PY) tools/generate.py

# Needs a GPU; without one it says so and exits 3.
bench: $(VENV)/.run-installed
	@$(PY) bench/bench.py --out bench.json

# The documentation site (mkdocs.yml, docs/) into site/; a warning (a broken link or anchor, a page missing
# from the nav) fails the build.
docs: $(VENV)/.test-installed
	$(PY) -m mkdocs build --strict --site-dir site

# CUDA 12's CUPTI and driver headers (from NVIDIA's wheels, headers only), for the collector's ABI test: it
# checks cupti_abi.h against them as against CUDA 13's. Named to pytest, so that missing ones fail the test.
CUDA12_HEADERS := $(VENV)/cuda12-headers
$(CUDA12_HEADERS)/.fetched: tools/cuda12_headers.py | $(PY)
	rm -rf $(CUDA12_HEADERS)
	$(PY) tools/cuda12_headers.py $(CUDA12_HEADERS)
	touch $@

cuda12-headers: $(CUDA12_HEADERS)/.fetched

test: fleet-deps tool-deps $(VENV)/.test-installed $(CUDA12_HEADERS)/.fetched
	$(PY) -m ruff check bisect_smem tests
	$(PY) -m mkdocs build --strict --site-dir site
	BISECT_SMEM_CUDA12_HEADERS=$(CUDA12_HEADERS) $(PY) -m pytest

lint: $(VENV)/.test-installed
	$(PY) -m ruff check bisect_smem tests

# The wheels, one per manylinux2014 platform (py3-none-manylinux2014_x86_64, ..._aarch64) into $(DIST): each
# ships the collector prebuilt for it by zig cc against glibc 2.17 (no docker; tools/prebuilt_collector.py
# refuses a library that needs a newer glibc), and auditwheel must find it manylinux2014-compatible (a tag of
# glibc 2.17 or older).
# build/ is removed first: it outlives a build, and setup.py picks one machine's library.
DIST ?= dist
WHEEL_MACHINES := x86_64 aarch64

wheel: $(WHEEL_MACHINES:%=wheel-%)

wheel-tools: | $(PY)
	@$(PY) -c "import ziglang, auditwheel, setuptools, wheel" 2>/dev/null || $(PY) -m pip install -q ziglang auditwheel setuptools wheel

wheel-%: wheel-tools
	$(PY) tools/prebuilt_collector.py $*
	rm -rf build
	BISECT_SMEM_WHEEL_MACHINE=$* $(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(DIST) .
	@shown="$$($(PY) -m auditwheel show $(DIST)/bisect_smem-*-py3-none-manylinux2014_$*.whl)" && echo "$$shown" && \
	  echo "$$shown" | grep -Eq '"manylinux_2_([0-9]|1[0-7])_$*"' || { echo "error: auditwheel: the $* wheel is not manylinux2014"; exit 1; }

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache bisect_smem/devices/collector/prebuilt
