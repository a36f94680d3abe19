# The two commands of the README's quick start: `make run` and `make test`.
# Each sets up .venv first (idempotent, seconds when already done): `make setup` and `make run`
# install the core alone (what the main job needs); `make test`, `test-slow` and `bench` add the
# test extra. Optional extras: `make setup EXTRAS=llm` (transformers, accelerate, gguf), EXTRAS=ray,
# or EXTRAS=llm,ray; extras installed once stay installed (see scripts/setup.sh).
# Which torch build: TORCH_INDEX=auto (default: PyTorch's CPU index on Linux x86-64 unless pip is
# configured with local wheels), TORCH_INDEX=URL (an index of your choice, e.g. a CUDA one:
# https://download.pytorch.org/whl/cu126) or TORCH_INDEX=none (pip's own configuration).
# `make docs` builds the documentation site into site/ (strict: a broken link fails it);
# `make results` renders docs/results/ and the README's tables from results/.
.PHONY: setup run test test-slow bench docs results

EXTRAS ?=
TORCH_INDEX ?= auto
comma := ,
# the extras `make setup` installs: EXTRAS, and the test extra for the targets that run tests
SETUP_EXTRAS = $(EXTRAS)
test test-slow bench: SETUP_EXTRAS = test$(if $(EXTRAS),$(comma)$(EXTRAS))

setup:
	@WINDTUNNEL_EXTRAS=$(SETUP_EXTRAS) WINDTUNNEL_TORCH_INDEX=$(TORCH_INDEX) ./scripts/setup.sh

run: setup
	.venv/bin/windtunnel run $(ARGS)

# The fast suite runs on every core (pytest-xdist; a test file stays on one worker, so the docs
# blocks run in order in one folder); TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= auto

test: setup
	.venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(ARGS)

test-slow: setup
	.venv/bin/python -m pytest -m slow $(ARGS)

bench: setup
	.venv/bin/python benchmarks/run_all.py $(ARGS)

docs:
	@WINDTUNNEL_EXTRAS=docs WINDTUNNEL_TORCH_INDEX=$(TORCH_INDEX) ./scripts/setup.sh
	.venv/bin/python scripts/render_cli.py
	.venv/bin/python scripts/render_api.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict $(ARGS)

results: setup
	.venv/bin/python scripts/render_results.py
