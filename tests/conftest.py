"""Shared test setup: the project's own test speech, GPU marker handling, one embedded LLM."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SHORT_REPLIES: dict[str, object] = {"llm_max_tokens": 16}
"""Options for the tests that run whole calls, which say so by passing them: replies of 16 tokens (about 12
words) instead of the shipped 96. They check what a call does, not how long the 135M model talks, and every
call waits for its replies to play out in real time (measured when this was a suite-wide setting: 96 -> 32
took 36 s off the four slowest call tests; 32 -> 16 took 121 s -> 99 s off five others)."""


def _has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (CUDA not available on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def speech_audio() -> Path:
    """asr/ and conversation/ speech, rendered by the project (simulator/test_speech.py)."""
    from simulator.test_speech import speech_dir

    return speech_dir()


@pytest.fixture(scope="session")
def embedded_llm_url() -> Iterator[str]:
    """One real SmolLM2 server (llama.cpp on loopback) for every test that needs an LLM."""
    from worker.llm_server import EmbeddedLLM

    with EmbeddedLLM() as llm:
        yield llm.base_url


@pytest.fixture(scope="session")
def orpheus_test_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Orpheus + SNAC, built through the real CLI (`python -m plugins.orpheus make-test-model
    DIR`) once per test run and shared by the xdist workers: the build is mostly imports (~30 s on 2 busy
    cores), and the Orpheus and TTS-plugin tests each needed one per worker. Tests only read it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "orpheus-test-model"
    with open(shared / "orpheus-test-model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the first one's build
        if not (root / "built").exists():
            shutil.rmtree(root, ignore_errors=True)  # a build cut short by a crashed worker
            proc = subprocess.run(
                [sys.executable, "-m", "plugins.orpheus", "make-test-model", str(root)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
            (root / "built").touch()
    return root
