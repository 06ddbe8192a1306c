"""The CPU voice: hibari-tts (24 kHz, ~100x real time on one core). Embedded default and fallback voice."""

from .tts import CpuVoiceTTS
from .voice import CpuVoice, CpuVoiceError

__all__ = ["CpuVoice", "CpuVoiceError", "CpuVoiceTTS"]
