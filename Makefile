# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/scheduler
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
PYTEST_ARGS ?=

.PHONY: venv run test services bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

run: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py ensure_object_store
	$(PY) manage.py bootstrap_demo
	$(PY) manage.py serve

services:
	bin/ensure-services

test: venv services
	DATABASE_URL=$(TEST_DATABASE_URL) TEST_REDIS_URL=$(TEST_REDIS_URL) \
		$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
