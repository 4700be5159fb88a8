# Two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs elmo, embeds sentences with the shipped model
#   make test   creates .venv, installs elmo with test tools, runs the tests
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install dev demo test lint

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

test: lint
	$(BIN)/python -m pytest -q

lint: dev
	$(BIN)/ruff check src tests benchmarks tools
