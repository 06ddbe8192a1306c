"""Orpheus test fixtures: the tiny random model is built once per session, through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def test_model(orpheus_test_model: Path) -> Path:
    """`python -m plugins.orpheus make-test-model DIR` → DIR/orpheus (Llama + tokenizer), DIR/snac."""
    root = orpheus_test_model
    assert (root / "orpheus" / "model.safetensors").is_file()
    assert (root / "orpheus" / "tokenizer.json").is_file()
    assert (root / "snac" / "config.json").is_file() and (root / "snac" / "pytorch_model.bin").is_file()
    return root


def _missing(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is None
    except ImportError:
        return True


# The GPU check (scripts/gpu_check.sh) runs `pytest -m gpu tests/orpheus` on a torch-only image without the
# engine's serving extras: modules that need them are left out of collection there instead of failing it.
# With `uv sync` (dev, CI) every one is present and nothing is left out.
collect_ignore = [
    name
    for name, needs in (
        ("test_cli.py", "soundfile"),
        ("test_server.py", "prometheus_client"),
        ("test_local_socket.py", "livekit"),  # imports the LiveKit TTS plugin and the server tests
    )
    if _missing(needs)
]
