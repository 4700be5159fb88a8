# Two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs elmo, embeds sentences with the shipped model
#   make test   creates .venv, installs elmo with test tools, runs the tests (flair's in
#               .venv-flair, which flair needs: see docs/flair.md)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install dev demo test test-flair node-example lint

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

test: lint test-flair node-example
	$(BIN)/python -m pytest -q

# flair needs huggingface_hub < 1.0, [dev] >= 1.0 (docs/flair.md): a venv of its own
FLAIR_VENV ?= .venv-flair
test-flair:
	test -x $(FLAIR_VENV)/bin/python || $(PY) -m venv $(FLAIR_VENV)
	$(FLAIR_VENV)/bin/pip install -q torch==2.13.0
	$(FLAIR_VENV)/bin/pip install -q -e '.[flair]' pytest
	$(FLAIR_VENV)/bin/python -m pytest -q tests/test_flair.py tests/test_readme.py tests/test_layer_choice.py -k flair

# onnxruntime-node for examples/onnx-node's test in tests/test_onnx.py, where npm is installed;
# without its CUDA files, which its install script would download from outside the registry
node-example:
	if command -v npm >/dev/null; then cd examples/onnx-node && \
		ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm install --no-audit --no-fund --silent; fi

lint: dev
	$(BIN)/ruff check src tests benchmarks tools
