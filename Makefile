# Two entry points (see README): `make sweep` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install sweep test lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local,test]'
	touch $@

install: $(VENV)/.installed

# The embedded default sweep: demo model on CPU, real Triton server, results in results/<sweep>/.
sweep: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/ansible-playbook sweep.yml

test: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && PATH="$(abspath $(BIN)):$$PATH" $(BIN)/ansible-lint
