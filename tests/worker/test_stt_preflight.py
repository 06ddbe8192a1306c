"""Start-up loads the STT model once, so a model that is there but cannot load stops the worker in one
line, before it registers, instead of failing in every job process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.settings import SettingsError, load_settings
from worker.startup import preflight


def test_a_model_folder_that_cannot_load_stops_start_up_in_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "whisper-broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"alignment_heads": [], "lang_ids": []}))
    (broken / "model.bin").write_bytes(b"\x00" * 64)  # present, named right, not a model
    with pytest.raises(SettingsError) as err:
        preflight(load_settings(stt_model=str(broken)))
    line = str(err.value)
    assert line.startswith("PARLEY_STT_MODEL: cannot load Whisper model") and "\n" not in line


def test_the_bundled_model_passes_the_check() -> None:
    preflight(load_settings())
