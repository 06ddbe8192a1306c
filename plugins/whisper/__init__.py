"""Streaming faster-whisper STT for LiveKit Agents (see stt.py for the streaming policy)."""

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
from .speech_gate import GateOptions
from .stt import StreamingOptions, WhisperConfigError, WhisperStream, WhisperSTT, WhisperSTTOptions

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
    "default_model",
    "download_model",
    "resolve_model_path",
    "shared_runner",
]
