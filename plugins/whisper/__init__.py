"""Streaming faster-whisper STT for LiveKit Agents (see stt.py for the streaming policy).

Names are imported on first use, so the host speech engine (`python -m plugins.whisper serve`) loads no
livekit module: a GPU engine image carries the model runtime, not the agent framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "SpeechClientOptions": "engine_client",
    "SpeechEngineClient": "engine_client",
    "SpeechEngineUnavailable": "engine_client",
    "GuardOptions": "guard",
    "BUNDLED_MODEL": "model",
    "DecodeRequest": "model",
    "DecodeResult": "model",
    "ModelOptions": "model",
    "Transcriber": "model",
    "WhisperModelError": "model",
    "WhisperModelRunner": "model",
    "default_model": "model",
    "download_model": "model",
    "resolve_model_path": "model",
    "shared_runner": "model",
    "check_language": "options",
    "GateOptions": "speech_gate",
    "StreamingOptions": "stt",
    "WhisperConfigError": "stt",
    "WhisperStream": "stt",
    "WhisperSTT": "stt",
    "WhisperSTTOptions": "stt",
    "check_vocabulary": "vocabulary",
    "parse_vocabulary": "vocabulary",
}

__all__ = [
    "BUNDLED_MODEL",
    "DecodeRequest",
    "DecodeResult",
    "GateOptions",
    "GuardOptions",
    "ModelOptions",
    "SpeechClientOptions",
    "SpeechEngineClient",
    "SpeechEngineUnavailable",
    "StreamingOptions",
    "Transcriber",
    "WhisperConfigError",
    "WhisperModelError",
    "WhisperModelRunner",
    "WhisperSTT",
    "WhisperSTTOptions",
    "WhisperStream",
    "check_language",
    "check_vocabulary",
    "default_model",
    "download_model",
    "parse_vocabulary",
    "resolve_model_path",
    "shared_runner",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .engine_client import SpeechClientOptions, SpeechEngineClient, SpeechEngineUnavailable
    from .guard import GuardOptions
    from .model import (
        BUNDLED_MODEL,
        DecodeRequest,
        DecodeResult,
        ModelOptions,
        Transcriber,
        WhisperModelError,
        WhisperModelRunner,
        default_model,
        download_model,
        resolve_model_path,
        shared_runner,
    )
    from .options import check_language
    from .speech_gate import GateOptions
    from .stt import StreamingOptions, WhisperConfigError, WhisperStream, WhisperSTT, WhisperSTTOptions
    from .vocabulary import check_vocabulary, parse_vocabulary
