# Two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs elmo, embeds sentences with the shipped model
#   make test   creates .venv, installs elmo with test tools, runs the tests (flair's in
#               .venv-flair, which flair needs: see docs/flair.md)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install dev demo test test-flair lint

$(BIN)/python:
	$(PY) -m venv $(VENV)
	# The CPU build of torch from the local wheel; never the multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0

install: $(BIN)/python
	$(BIN)/pip install -q -e .

dev: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'

demo: install
	$(BIN)/python -m elmo.demo

test: lint test-flair
	$(BIN)/python -m pytest -q

# flair needs huggingface_hub < 1.0, [dev] >= 1.0 (docs/flair.md): a venv of its own
FLAIR_VENV ?= .venv-flair
test-flair:
	test -x $(FLAIR_VENV)/bin/python || $(PY) -m venv $(FLAIR_VENV)
	$(FLAIR_VENV)/bin/pip install -q torch==2.13.0
	$(FLAIR_VENV)/bin/pip install -q -e '.[flair]' pytest
	$(FLAIR_VENV)/bin/python -m pytest -q tests/test_flair.py tests/test_readme.py -k flair

lint: dev
	$(BIN)/ruff check src tests benchmarks tools
