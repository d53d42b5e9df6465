# Two commands do all setup on a fresh machine: `make train` and `make test`.
# Each creates the local virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch; an unpinned torch would pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0

.PHONY: venv test test-all train lint benchmark clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e ".[dev]" "$(TORCH_PIN)"
	touch $@

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

test-all: venv
	$(PY) -m pytest -q -m ""

train: venv
	$(PY) scripts/train.py $(ARGS)

benchmark: venv
	$(PY) scripts/benchmark.py $(ARGS)

lint: venv
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
