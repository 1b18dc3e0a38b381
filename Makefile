# The README's two commands: `make demo` and `make test`. Each bootstraps .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test typecheck bench bench-kept bench-concurrency bench-open bench-peers docs clean adk-ui-check

# editable_mode=compat installs a plain path .pth, which mypy and pyright follow: with setuptools'
# default editable mode (an import hook) both report `import-not-found` for rxllm from a project
# beside this checkout (measured with mypy 2.4 and pyright 1.1.414; `strict` mode also works but
# needs a reinstall for every new module).
# The development tools are pyproject's `dev` dependency group (PEP 735, never published): pip
# installs groups from 25.1 on, so the bootstrap first brings the venv's pip up to that.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=25.1'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[otel,postgres,mcp,web]' --group dev \
		--config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rxllm demo

# `pytest` includes tests/test_type_checkers.py: pyright --verifytypes (score gate) and the docs' and
# examples' code under mypy --strict (no pydantic plugin) and pyright --strict. `make typecheck` runs
# just those.
# The suite runs on every core (pytest-xdist), one test file per worker at a time (module fixtures -- a
# server, the type checkers' one run -- stay in one process); `pytest tests/...` alone runs in one process.
test: $(STAMP)
	$(BIN)/ruff check rxllm tests examples benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n auto --dist loadfile

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/python -m pytest -q tests/test_type_checkers.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_stream.py

# Partials kept on an application-sized heap (fastapi, uvicorn, openai, google-genai, OpenTelemetry,
# rxllm.agents imported first): CPU per chunk against the floor, the collector's full passes.
bench-kept: $(STAMP)
	$(BIN)/python benchmarks/bench_kept.py

bench-concurrency: $(STAMP)
	$(BIN)/python benchmarks/bench_concurrency.py

# Memory per open stream (1,000 held open; --open 10000 for more), rxllm against plain httpx2.
bench-open: $(STAMP)
	$(BIN)/python benchmarks/bench_open_streams.py

# The peers table: PEERS_PYTHON is a throwaway virtual environment's python with the peers installed
# (see benchmarks/bench_peers.py); this project's packages come after its own on the path.
PEERS_PYTHON ?= $(BIN)/python
bench-peers: $(STAMP)
	PYTHONPATH=$(CURDIR):$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
		$(PEERS_PYTHON) benchmarks/bench_peers.py

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(ADK_UI_VENV) .mypy_cache .pytest_cache .ruff_cache site

# ADK's own dev UI (the built one inside the google-adk package) against `rxllm web examples/agents`,
# driven in headless Chromium: google-adk goes into the throwaway .adk-ui-venv/, never into .venv.
ADK_UI_VENV := .adk-ui-venv
adk-ui-check: $(STAMP)
	test -x $(ADK_UI_VENV)/bin/python || $(PYTHON) -m venv $(ADK_UI_VENV)
	$(ADK_UI_VENV)/bin/python -m pip install --quiet --disable-pip-version-check google-adk
	$(BIN)/python tests/web/adk_ui_check.py --ui "$$($(ADK_UI_VENV)/bin/python -c 'import importlib.util, pathlib; \
		print(pathlib.Path(importlib.util.find_spec("google.adk").submodule_search_locations[0]) / "cli" / "browser")')"
