"""Shared test setup: paths to the shared test audio, GPU/e2e marker handling."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_AUDIO = Path(os.environ.get("PARLEY_TEST_AUDIO", ROOT.parent / "shared" / "audio"))


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
def shared_audio() -> Path:
    if not SHARED_AUDIO.exists():
        pytest.fail(f"shared test audio not found at {SHARED_AUDIO} (set PARLEY_TEST_AUDIO)")
    return SHARED_AUDIO


@pytest.fixture(scope="session")
def embedded_llm_url() -> Iterator[str]:
    """One real SmolLM2 server (llama.cpp on loopback) for every test that needs an LLM."""
    from worker.llm_server import EmbeddedLLM

    with EmbeddedLLM() as llm:
        yield llm.base_url
