# `make test`: venv, dependencies, Docker daemon, sandbox image, then the test suite.
# `make run`:  the same set-up, then the reference and random agents on every env.
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(VENV)/bin/gym-sysmath

.PHONY: setup docker image test run bench lint

$(VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,train,notebook]'
	touch $@

setup: $(VENV)/.installed

docker:
	bash .ci/ensure-docker

image: setup docker
	$(CLI) sandbox build --bootstrap

test: image
	$(PY) -m pytest -q

run: image
	$(CLI) eval --all --agent reference --agent random

bench: image
	$(PY) benchmarks/step_latency.py

lint: setup
	$(VENV)/bin/ruff check .
