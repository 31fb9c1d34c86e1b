# trainwise: two commands for a fresh clone.
#   make demo   runs the main job (installs .venv first if needed)
#   make test   runs the test suite (installs .venv first if needed): checkov over
#               infra/terraform, the import contracts, then pytest
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# checkov pins versions of packaging and boto3 that clash with the project's, so it lives in
# its own venv; .venv/bin/checkov is a two-line wrapper that runs it from there.
CHECKOV_VENV    := .venv-checkov
CHECKOV_VERSION := 3.3.30
CHECKOV_STAMP   := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)

.PHONY: demo test test-fast venv bench clean-venv checkov

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,ray,aws]'
	@touch $(STAMP)

$(CHECKOV_STAMP):
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV) || python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	@touch $(CHECKOV_STAMP)

$(VENV)/bin/checkov: $(STAMP) $(CHECKOV_STAMP)
	@printf '#!/bin/sh\n# Runs checkov from its own venv (see the Makefile).\nexec "$$(dirname "$$0")/../../$(CHECKOV_VENV)/bin/checkov" "$$@"\n' > $@
	@chmod +x $@

venv: $(STAMP) $(VENV)/bin/checkov

# The Terraform scan: zero failed checks; every skip is inline with its reason (docs/aws.md).
checkov: $(VENV)/bin/checkov
	$(VENV)/bin/checkov -d infra/terraform --quiet --compact

demo: $(STAMP)
	$(VENV)/bin/trainwise run --config configs/demo.yaml

test: $(STAMP) checkov
	$(VENV)/bin/lint-imports
	@.ci/chromium
	$(PY) -m pytest -q --durations=25

# The fast tier for a contributor's loop: no Prefect server, nothing marked slow.
test-fast: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -m "not slow and not server"

clean-venv:
	rm -rf $(VENV) $(CHECKOV_VENV)
