"""The engine's own settings: `PARLEY_ORPHEUS_*` (and `PARLEY_LANGUAGE`) from the environment or `.env`.

The engine image carries only `plugins/` and `deploy/`, so the engine must never read the worker's settings
module: these are the flag defaults of `python -m plugins.orpheus serve | synth`, read here and nowhere else.
A bad value is one line naming the variable (a `ValueError`, which the CLI prints without a traceback).
"""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

Backend = Literal["torch", "cuda", "trtllm", "openai", "standin"]


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PARLEY_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    orpheus_backend: Backend = "torch"
    orpheus_model_dir: str = ""  # checkpoint dir; empty = the tiny random test model (CPU proof only)
    orpheus_snac_dir: str = ""
    orpheus_device: str = "cpu"
    orpheus_max_streams: int = Field(32, ge=1)  # admission limit; past it a stream gets a clear "full" error
    orpheus_http_port: int = Field(0, ge=0, le=65535)  # loopback /metrics /capacity /healthz; 0 = off
    orpheus_openai_base_url: str = ""  # remote completions endpoint serving Orpheus (openai backend)
    orpheus_trtllm_runtime: Literal["pytorch", "engine"] = "pytorch"
    orpheus_temperature: float = Field(0.5, ge=0.0, le=2.0)
    orpheus_top_p: float = Field(0.9, gt=0.0, le=1.0)
    orpheus_repetition_penalty: float = Field(1.1, ge=1.0, le=2.0)
    language: Literal["en", "ko"] = "en"


def load_engine_settings() -> EngineSettings:
    """Read the settings or raise `ValueError` with one line naming the first bad variable."""
    try:
        return EngineSettings()  # type: ignore[call-arg]  # pydantic-settings fills fields from the env
    except ValidationError as err:
        e = err.errors()[0]
        name = f"PARLEY_{str(e['loc'][0]).upper()}" if e.get("loc") else "engine settings"
        raise ValueError(f"{name}: {e.get('msg', 'invalid value')}") from None


@functools.lru_cache(maxsize=1)
def engine_settings() -> EngineSettings:
    return load_engine_settings()
