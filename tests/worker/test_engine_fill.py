"""The worker points the Orpheus plugin's fill probe at its engine from its own settings: the plugin never
reads the worker's settings (the engine image has no worker code)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.orpheus import capacity as orpheus_tts
from worker import load as server
from worker.settings import use_settings


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    use_settings(None)
    monkeypatch.setattr(server, "_engine_fill_configured", False)
    yield monkeypatch
    use_settings(None)
    orpheus_tts.configure_engine_fill("")


def test_unconfigured_plugin_reports_no_engine() -> None:
    orpheus_tts.configure_engine_fill("")
    assert orpheus_tts.engine_fill() == 0.0


def test_worker_load_asks_the_engine_its_settings_name(fresh: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fresh.setenv("PARLEY_ENGINE_ADDRESS", f"unix://{tmp_path}/none.sock")
    assert server.engine_load() == 1.0  # configured from the worker's settings; the engine cannot be asked


def test_cpu_voice_worker_has_no_engine_load(fresh: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fresh.setenv("PARLEY_ENGINE_ADDRESS", f"unix://{tmp_path}/none.sock")
    fresh.setenv("PARLEY_TTS_BACKEND", "cpu")
    assert server.engine_load() == 0.0
