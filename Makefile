# trainwise: two commands for a fresh clone.
#   make demo   runs the main job (installs .venv first if needed)
#   make test   runs the test suite (installs .venv first if needed)
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test venv bench clean-venv

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/trainwise run --config configs/demo.yaml

test: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q

clean-venv:
	rm -rf $(VENV)
