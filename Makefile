# The two commands of the README's quick start: `make run` and `make test`.
# Each sets up .venv first (idempotent, seconds when already done).
# Optional extras: `make setup EXTRAS=llm` (transformers, accelerate, gguf), EXTRAS=ray, or
# EXTRAS=llm,ray; extras installed once stay installed (see scripts/setup.sh).
.PHONY: setup run test test-slow bench

EXTRAS ?=

setup:
	@WINDTUNNEL_EXTRAS=$(EXTRAS) ./scripts/setup.sh

run: setup
	.venv/bin/windtunnel run $(ARGS)

# The fast suite runs on every core (pytest-xdist; the tests that start Ray share one worker, by
# their xdist_group); TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= auto

test: setup
	.venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(ARGS)

test-slow: setup
	.venv/bin/python -m pytest -m slow $(ARGS)

bench: setup
	.venv/bin/python benchmarks/run_all.py $(ARGS)
