"""Shared test setup: the project's own test speech, GPU marker handling, one embedded LLM."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Replies of 16 tokens (about 12 words) instead of 96: the tests check what a call does, not how long the
# 135M model talks, and every call waits for its replies to play out in real time (measured: 96 -> 32 took
# 36 s off the four slowest call tests; 32 -> 16 took 121 s -> 99 s off five others). `PARLEY_LLM_MAX_TOKENS`
# set outside wins.
os.environ.setdefault("PARLEY_LLM_MAX_TOKENS", "16")


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
