# trainwise: two commands for a fresh clone.
#   make demo   runs the main job (installs .venv first if needed)
#   make test   runs the test suite (installs .venv first if needed): checkov over
#               infra/terraform, the import contracts, then pytest
#   make lock   regenerates requirements.lock from pyproject.toml (after changing a dependency)
#
# .venv holds requirements.lock (every extra, pinned) and this project with --no-deps. The lock
# pins torch's CPU build (torch==2.13.0+cpu): pip takes it from PyTorch's CPU index, or from a
# wheel directory pip is configured with; where neither is set up, give the index:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
# docs/install.md says why pip-tools and not uv, and what each platform gets.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock
TORCH_INDEX ?=
LOCK_PIP_ARGS := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
# checkov pins versions of packaging and boto3 that clash with the project's, so it lives in
# its own venv; .venv/bin/checkov is a two-line wrapper that runs it from there.
CHECKOV_VENV    := .venv-checkov
CHECKOV_VERSION := 3.3.30
CHECKOV_STAMP   := $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)

.PHONY: demo test test-fast test-heavy venv bench clean-venv checkov lock

$(STAMP): pyproject.toml $(LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet "$$(grep '^pip==' $(LOCK))"
	$(PY) -m pip install --quiet -r $(LOCK) $(LOCK_PIP_ARGS) || { echo "make: installing $(LOCK) failed;" \
	  "if pip found no torch==2.13.0+cpu, run again with TORCH_INDEX=https://download.pytorch.org/whl/cpu" >&2; exit 1; }
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip check
	@touch $(STAMP)

# The lock: every extra, resolved by pip's own resolver for this platform (Linux x86_64,
# Python 3.11); no hashes, since the CPU build of torch is one file on PyTorch's index and
# another in a local wheel directory (docs/install.md).
lock: $(STAMP)
	CUSTOM_COMPILE_COMMAND="make lock" $(PY) -m piptools compile --quiet --all-extras --strip-extras \
	  --no-emit-index-url --no-emit-find-links --unsafe-package trainwise $(LOCK_PIP_ARGS) \
	  -o $(LOCK) pyproject.toml

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

# Everything but the tests marked heavy (a multi-node Ray cluster, a full training run), which
# `make test-heavy` runs; .ci/run runs both. The budget: `make test` with the install under 15 min.
test: $(STAMP) checkov
	$(VENV)/bin/lint-imports
	@.ci/chromium
	$(PY) -m pytest -q -m "not heavy" --durations=25

test-heavy: $(STAMP)
	$(PY) -m pytest -q -m heavy --durations=10

# The fast tier for a contributor's loop: no Prefect server, nothing marked slow.
test-fast: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -m "not slow and not server"

clean-venv:
	rm -rf $(VENV) $(CHECKOV_VENV)
