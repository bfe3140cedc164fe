# Two commands do all the set-up: `make run` and `make test` (see README.md).
# PYTHON picks the interpreter for a new venv (3.11 to 3.13), VENV its directory, so one
# checkout can hold several: `make test PYTHON=python3.13 VENV=.venv-3.13`.
PYTHON ?= $(shell for p in python3.11 python3.12 python3.13 python3; do $$p -c '' 2>/dev/null && { echo $$p; break; }; done)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/scheduler
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# pytest-xdist processes, each taking a test file at a time; the tests marked `alone` run after
# them in one process (0: everything in one process, no xdist). README.md says more.
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=

.PHONY: venv test-venv run test services bench clean

# What running needs (`make run`, `make venv`), and the test tools on top (`make test`). Each
# stamp is remade, and its packages reinstalled, only when pyproject.toml changes.
venv: $(VENV)/.installed-run
test-venv: $(VENV)/.installed-test

$(VENV)/.installed-run: pyproject.toml
	@echo "make: installing the scheduler and its dependencies into $(VENV) (pip install -e .; about a minute the first time)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-run
	@echo "make: installing the test tools into $(VENV) (pip install -e '.[test]': pytest, moto, schemathesis, selenium, ...)"
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# `make run PORT=8001` serves on another port; result links in mail follow it.
run: venv
	$(PY) manage.py serve --check
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_object_store
	$(PY) manage.py bootstrap_demo --url http://127.0.0.1:$(PORT)
	PUBLIC_BASE_URL=$${PUBLIC_BASE_URL:-http://127.0.0.1:$(PORT)} $(PY) manage.py serve --port $(PORT)

services:
	bin/ensure-services

PYTEST := DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) $(PY) -m pytest

# With workers, a selection holding no `alone` test ends the second run with pytest's 5 (none collected).
test: test-venv services
ifeq ($(PYTEST_WORKERS),0)
	$(PYTEST) $(PYTEST_ARGS)
else
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadfile -m "not alone" $(PYTEST_ARGS)
	$(PYTEST) -m alone $(PYTEST_ARGS) || [ $$? -eq 5 ]
endif

clean:
	rm -rf $(VENV) .venv-* var .pytest_cache .hypothesis
