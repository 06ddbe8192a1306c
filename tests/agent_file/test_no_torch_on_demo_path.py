"""`make demo` installs no torch (pyproject `engine` group): the CPU-voice path must never import it, nor
the engine's other heavy packages, nor matplotlib (the `bench` group). Run in a fresh interpreter where
importing them fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "snac", "transformers", "llama_cpp", "matplotlib"):
            raise ImportError(f"{name} imported on the CPU-voice path")
        return None

sys.meta_path.insert(0, Block())
import examples.booking_service, benchmarks.call, simulator.offline, simulator.call_script  # noqa: E401
import caches.__main__, worker.agent_file.__main__, worker.server  # noqa: E401
from worker.llm_server import model_path
from worker.pipeline import build_call, load_components
from worker.settings import load_settings

settings = load_settings(agent="examples/dental_clinic.yaml", tts_backend="cpu")
comp = load_components(settings, "http://127.0.0.1:9/v1")
session, agent = build_call(settings, comp)
assert comp.live["tts"].startswith("cpu-voice") and model_path().endswith(".gguf")
print("ok", agent.greeting)
"""


@pytest.mark.slow
def test_cpu_voice_demo_path_never_imports_torch() -> None:
    res = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().endswith("this is Sam. How can I help you today?")
