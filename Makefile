# Parley: every entry point a developer or CI needs. `make setup` is idempotent.
SHELL := /bin/bash
PY := .venv/bin/python
UV ?= uv
UV_VERSION := 0.13.8
export PATH := $(CURDIR)/bin:$(PATH)

DEMO_AGENT ?= examples/dental_clinic.yaml
DEMO_SCRIPT ?= examples/calls/book_cleaning.yaml

.PHONY: setup setup-python setup-python-demo setup-demo setup-system setup-livekit setup-e2e demo dev test check \
	lint typecheck audit pytest pytest-fast bench load phrases clean gpu-check gpu-check-stage

setup: setup-python setup-system setup-livekit setup-e2e

# Everything, the engine group (torch, snac, transformers) included: tests, benchmarks, GPU hosts.
setup-python:
	@command -v $(UV) >/dev/null 2>&1 || pip install -q "uv==$(UV_VERSION)"
	$(UV) sync --frozen --all-groups --quiet

# The CPU-voice path only (no torch): fast on a fresh machine. --inexact keeps what a fuller setup installed.
setup-python-demo:
	@command -v $(UV) >/dev/null 2>&1 || pip install -q "uv==$(UV_VERSION)"
	$(UV) sync --frozen --inexact --quiet

setup-demo: setup-python-demo setup-system setup-livekit

setup-system:
	@bash scripts/setup_system.sh

setup-livekit:
	@bash scripts/setup_livekit.sh

setup-e2e:
	@bash scripts/setup_e2e.sh

lint:
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

typecheck:
	$(PY) -m mypy worker plugins turn_detection caches benchmarks deploy examples simulator

# Fails when no vulnerability database answers; AUDIT_OFFLINE=1 skips what cannot be checked, and says so.
AUDIT_OFFLINE ?= 0
audit:
	@AUDIT_OFFLINE=$(AUDIT_OFFLINE) bash scripts/audit.sh

# Two workers, one test file each at a time (a file's shared stack or engine is set up once): most of the
# suite waits on real-time audio, so two files at once take 10 min where one at a time took 17 on 2 cores.
PYTEST_WORKERS ?= 2
pytest:
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test: setup lint typecheck audit pytest

# The fast lane, for every edit: lint, types and the tests not marked slow, e2e or gpu (about 3 min on 2 cores).
# `make test` runs everything.
FAST_TESTS := not slow and not e2e and not gpu
pytest-fast:
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "$(FAST_TESTS)"

check: lint typecheck pytest-fast

phrases: setup-python-demo
	$(PY) -m caches build --dir out/phrase-cache
	$(PY) -m worker.agent_file phrases $(DEMO_AGENT) --dir out/phrase-cache

# The dental-clinic agent answers a scripted caller; the booking service it books into runs for the call and
# prints its bookings at the end. The room runs on loopback (not a sealed namespace): the worker must reach
# the booking service on this host's 127.0.0.1.
demo: setup-demo phrases
	$(PY) -m worker.agent_file check $(DEMO_AGENT)
	$(PY) -m examples.booking_service --port 8765 -- \
	$(PY) -m benchmarks.call --agent $(DEMO_AGENT) --script $(DEMO_SCRIPT) --pipeline parley --out out/demo --demo --livekit auto \
	  --isolation loopback --json out/demo/call.json

dev: setup phrases
	@bash scripts/dev.sh

BENCH_RUNS ?= 5
bench: setup phrases
	$(PY) -m simulator.call_script simulator/calls/reschedule.yaml --out out/calls/reschedule
	$(PY) -m simulator.call_script simulator/calls/new_patient.yaml --out out/calls/new_patient
	$(PY) -m benchmarks.call --data $$($(PY) -m simulator.test_speech)/conversation --data out/calls/reschedule --data out/calls/new_patient --pipeline parley,stock-tuned,stock --runs $(BENCH_RUNS) --livekit auto --out out/bench --json out/bench/call.json

load: setup phrases
	$(PY) -m benchmarks.load --calls 4 --minutes 10 --json out/load/load.json --out out/load

clean:
	rm -rf out .pytest_cache .mypy_cache .ruff_cache

# The Orpheus `--backend cuda` engine on a GPU: benchmark at the full 3B shape + `pytest -m gpu`, results in
# $(GPU_CHECK_OUT) (see scripts/gpu_check.sh). gpu-check-stage copies the Python 3.12 wheels a torch-only GPU
# box lacks into .gpucheck/ (git-ignored) so a device call can carry them.
GPU_CHECK_OUT ?= out/gpu-check
GPU_WHEELS ?= ../shared/gpu/wh
gpu-check:
	OUT=$(GPU_CHECK_OUT) PYTHON=$(if $(wildcard $(PY)),$(PY),python3) bash scripts/gpu_check.sh

gpu-check-stage:
	rm -rf .gpucheck && mkdir -p .gpucheck/wh && cp $(GPU_WHEELS)/*.whl .gpucheck/wh/
	$(PY) -c "from plugins.whisper.ct2_file import save_int8_copy; from plugins.whisper.weights import bundled_model_path; save_int8_copy(bundled_model_path(), '.gpucheck/whisper')"
	$(PY) -c "import shutil; from simulator.test_speech import speech_dir; shutil.copytree(speech_dir() / 'asr', '.gpucheck/speech', ignore=shutil.ignore_patterns('*.txt'))"
	@echo "staged $$(ls .gpucheck/wh | wc -l) wheels, tiny.en as int8 and $$(ls .gpucheck/speech | wc -l) speech files in .gpucheck/"
