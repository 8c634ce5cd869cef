# topicsrv: `make run` starts a server, `make test` runs everything a submission must pass.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
RUN_STAMP := $(VENV)/.installed-run-stamp
EXT_STAMP := $(VENV)/.installed-ext-stamp
# the compiled hot path (topicsrv/buildinfo.py): rebuilt when one of its sources changes
HOT_SRC := setup.py topicsrv/buildinfo.py $(shell sed -n 's/^    "topicsrv\.\([a-z_.]*\)",.*/topicsrv.\1/p' topicsrv/buildinfo.py | tr . / | sed 's/$$/.py/')
BUILD_INFO = @$(PY) -c 'from topicsrv.buildinfo import main; main()'
PYTHON ?= $(shell command -v python3.11 || command -v python3)
DATA_DIR ?= ./data
HTTP_PORT ?= 7070
RESP_PORT ?= 6379
# test workers (pytest-xdist): independent test files run side by side; `make test TEST_JOBS=0`
# runs them one at a time
TEST_JOBS ?= 2
XDIST := $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile)

.PHONY: setup run test soak lint typecheck unit bench bench-quick bench-wal compat-suites clean

# `make run` needs only the server's own dependencies; `make test` adds dev tools and Spark.
# `pip install -e .` also compiles the hot path (setup.py); BUILD_INFO says which path runs.
$(RUN_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	$(BUILD_INFO)
	@touch $(RUN_STAMP) $(EXT_STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'
	$(BUILD_INFO)
	@touch $(STAMP) $(RUN_STAMP) $(EXT_STAMP)

$(EXT_STAMP): $(RUN_STAMP) $(HOT_SRC)
	$(PY) -m pip install -q --no-deps -e .
	$(BUILD_INFO)
	@touch $(EXT_STAMP)

setup: $(STAMP) $(EXT_STAMP)

run: $(RUN_STAMP) $(EXT_STAMP)
	$(PY) -m topicsrv serve --data-dir $(DATA_DIR) --bind 127.0.0.1 --http-port $(HTTP_PORT) --resp-port $(RESP_PORT) $(ARGS)

lint: setup
	$(PY) -m ruff check topicsrv tests compat bench spark

typecheck: setup
	$(PY) -m mypy

test: setup
	@bash scripts/ensure-tools.sh
	$(PY) -m ruff check topicsrv tests compat bench spark
	$(PY) -m mypy
	$(PY) -m pytest -q -ra $(XDIST)
	@echo "-- the RESP, engine, delivery-order and scripting tests again on the pure-Python hot path (TOPICS_PURE=1)"
	TOPICS_PURE=1 $(PY) -m pytest -q $(XDIST) tests/resp tests/engine tests/notify tests/httpapi/test_http_priority.py \
		tests/scripting compat/test_scripting.py

soak: setup  ## the 20-cycle kill -9 soak over every feature (minutes; not in make test)
	$(PY) -m pytest -q -ra -m soak tests/integration/test_soak.py

unit: setup
	$(PY) -m pytest -q tests/engine

bench: setup
	@bash scripts/ensure-tools.sh
	$(PY) -m bench $(ARGS)

bench-quick: setup
	@bash scripts/ensure-tools.sh
	$(PY) -m bench --quick $(ARGS)

# fsync-class XADD by 64 clients vs --wal-shards 1/2/4/8 and redis-server appendfsync always
# (real servers, alternating rounds; ~5 min: not part of `make bench`; docs/performance.md)
bench-wal: setup
	@bash scripts/ensure-tools.sh
	$(PY) -m bench.walbench --rounds 5 $(ARGS)

# Valkey's stream TCL suites and redis-py's tests against topicsrv and redis-server, side by
# side (VALKEY_GIT=... REDISPY_GIT=... name local copies, else the public repositories are
# cloned once into ~/.cache/topicsrv-compat-suites; see the script's header)
compat-suites: setup
	bash scripts/compat-suites.sh

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .hypothesis
	find topicsrv -name '*.so' -delete
	rm -f *__mypyc.*.so
