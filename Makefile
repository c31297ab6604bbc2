# Two commands on a fresh machine: `make demo` and `make test`.
# Both create .venv on first use and install the package with the pinned CPU torch;
# `make test` adds the pinned CPU TensorFlow, JAX, transformers, accelerate and Lightning so
# every suite runs too. `make check` runs the gates (ruff over the package and the tests, mypy
# --strict over nanguard/core) with the versions pinned in the dev extra; `make test-fast`
# leaves out the tests marked slow (processes, compilation, model training).
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
FRAMEWORKS_STAMP := $(VENV)/.installed-frameworks

.PHONY: demo check test test-fast bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[torch,dev]'
	touch $(STAMP)

$(FRAMEWORKS_STAMP): $(STAMP) constraints.txt
	$(PY) -m pip install --quiet -c constraints.txt tensorflow-cpu 'jax[cpu]' optax \
		transformers accelerate pytorch-lightning
	touch $(FRAMEWORKS_STAMP)

demo: $(STAMP)
	$(PY) -m nanguard demo

check: $(STAMP)
	$(PY) -m ruff check nanguard tests
	$(PY) -m mypy nanguard/core

test: $(FRAMEWORKS_STAMP)
	$(PY) -m pytest -n 2 -q

test-fast: $(FRAMEWORKS_STAMP)
	$(PY) -m pytest -n 2 -q -m "not slow"

bench: $(FRAMEWORKS_STAMP)
	$(PY) benchmarks/ops.py
	$(PY) benchmarks/detect.py
	$(PY) benchmarks/guard.py
	$(PY) benchmarks/guard_rollback.py
	$(PY) benchmarks/guard_integrations.py
	$(PY) benchmarks/lint.py
	$(PY) benchmarks/audit.py
	$(PY) benchmarks/tf_ops.py
	$(PY) benchmarks/tf_detect.py
	$(PY) benchmarks/tf_guard.py
	$(PY) benchmarks/jax_ops.py
	$(PY) benchmarks/jax_detect.py
	$(PY) benchmarks/jax_guard.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
