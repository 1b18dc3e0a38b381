# The README's two commands: `make demo` and `make test`. Each bootstraps .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test typecheck bench bench-kept bench-concurrency docs clean

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
test: $(STAMP)
	$(BIN)/ruff check rxllm tests examples benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

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

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache site
