# Two commands do all setup on a fresh machine: `make train` and `make test`.
# Each creates the local virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch; an unpinned torch would pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0

.PHONY: venv test test-all train lint benchmark gpu-report clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e ".[dev]" "$(TORCH_PIN)"
	touch $@

# The suite runs in TEST_JOBS processes (pytest-xdist), a test file to each at a time: a cold
# Warp cache is mostly compilation, one core per module, and most tests step a few worlds on
# one thread. TEST_JOBS=0 runs it in this process.
TEST_JOBS ?= 2

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

test-all: venv
	$(PY) -m pytest -q -m ""

train: venv
	$(PY) scripts/train.py $(ARGS)

benchmark: venv
	$(PY) scripts/benchmark.py $(ARGS)

# Registers, spills and threads per world of one step on a GPU, read without one (e.g.
# ARGS="--model quadruped --worlds 4096 --arch 90"). Warp's PTX needs a newer ptxas than most
# CUDA installs have: pip's nvidia-cuda-nvcc, the gpu-tools extra.
gpu-report: $(VENV)/.gpu-tools
	$(PY) scripts/gpu_report.py $(ARGS)

$(VENV)/.gpu-tools: $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[gpu-tools]" "$(TORCH_PIN)"
	touch $@

lint: venv
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
