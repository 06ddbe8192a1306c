"""Parley's Orpheus TTS: a shared, batched engine per GPU host (`engine/`, `server.py`) and its client.

Importing this package is cheap (no torch): job processes use only `EngineClient`.
"""

from plugins.orpheus.client import ClientStream, EngineClient, EngineError, EngineEvent

__all__ = ["ClientStream", "EngineClient", "EngineError", "EngineEvent"]
