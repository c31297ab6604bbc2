# Two commands on a fresh machine: `make demo` and `make test`.
# Both create .venv on first use and install the package with the pinned CPU torch.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[torch,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m nanguard demo

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

bench: $(STAMP)
	$(PY) benchmarks/ops.py
	$(PY) benchmarks/detect.py
	$(PY) benchmarks/guard.py
	$(PY) benchmarks/lint.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
