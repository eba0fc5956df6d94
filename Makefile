# tinyedu: one entry point for a fresh machine.
#   make serve   build the walkthrough site and serve it on http://127.0.0.1:8000 (the main job)
#   make test    the whole test suite: unit tests, notebooks (nbval), strict site build, browser test
# Both create .venv, install tinyedu editable with the extras they need, and check system tools.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
PYTEST_ARGS ?=
# mkdocs-material prints a banner about MkDocs 2.0 on every build; it is not a problem of this site.
export NO_MKDOCS_2_WARNING := 1
# The suite's workers and notebooks share 2 cores: OpenMP's idle threads should sleep, not spin
# (tinyedu never sets this itself; see tinyedu/runtime/toolchain.py). A value you set is kept.
export OMP_WAIT_POLICY ?= passive

.PHONY: help venv system system-browser serve site test test-unit test-notebooks notebooks check-exercises lint \
        bench clean

help:
	@echo "make serve      build and serve the walkthrough site at http://$(HOST):$(PORT)"
	@echo "make test       run the whole test suite (unit, nbval, strict site build, browser)"
	@echo "make notebooks  open the notebooks in Jupyter Lab"
	@echo "make check-exercises [CHAPTER=3]  check your answers in the notebooks' exercise cells"
	@echo "make bench      run the benchmarks (not tests)"

# The venv is rebuilt when pyproject.toml changes; the stamp file records a finished install.
$(BIN)/.tinyedu-installed: pyproject.toml
	@PYTHON=$(PYTHON) scripts/ensure_system_tools.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

venv: $(BIN)/.tinyedu-installed

system:
	@PYTHON=$(PYTHON) scripts/ensure_system_tools.sh

system-browser:
	@PYTHON=$(PYTHON) scripts/ensure_system_tools.sh --browser

site: venv system
	$(BIN)/mkdocs build --strict

serve: venv system
	$(BIN)/mkdocs serve --dev-addr $(HOST):$(PORT)

test: venv system-browser
	$(BIN)/pytest tests notebooks --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
		-n auto --dist loadfile $(PYTEST_ARGS)

test-unit: venv system
	$(BIN)/pytest tests -m "not browser" $(PYTEST_ARGS)

test-notebooks: venv system
	$(BIN)/pytest notebooks --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg $(PYTEST_ARGS)

notebooks: venv system
	$(BIN)/jupyter lab notebooks

# Your answers in the notebooks' exercise cells (save the notebook first), chapter by chapter. It runs
# only the exercise checkers, not the test suite; stubs count as "not done yet", not as failures.
# `pytest -m chapter3` checks the same answers as pytest tests.
check-exercises: venv system
	$(BIN)/python -m tinyedu.exercises $(CHAPTER)

lint: venv
	$(BIN)/ruff check tinyedu tests bench

# tinygrad (the bench extra) is compared against in bench/; its CPU backend compiles with clang.
bench: venv system
	@PYTHON=$(PYTHON) scripts/ensure_system_tools.sh --bench
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) site .pytest_cache .hypothesis artifacts
