"""The engine's deployment variables (README, "Configuration") from the environment or `.env`.

The engine image carries only `plugins/` and `deploy/`, so the engine must never read the worker's settings
module: these are the flag defaults of `python -m plugins.orpheus serve | synth`, read here and nowhere else;
every other engine knob is a flag with its default. Names are the worker's where both read one
(`PARLEY_LANGUAGE`); the engine's own start with `PARLEY_ORPHEUS_` (the model) or `PARLEY_ENGINE_` (serving).
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
    orpheus_device: str = "cpu"
    engine_max_streams: int = Field(32, ge=1)  # admission limit; past it a stream gets a clear "full" error
    engine_http_port: int = Field(0, ge=0, le=65535)  # loopback /metrics /capacity /healthz; 0 = off
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
