"""Framing shared by Parley's host engines (Orpheus TTS, Whisper STT) on their Unix sockets.

A frame is `u32 big-endian length | kind byte | payload`; kind `J` = a UTF-8 JSON object, kind `A` =
`u32 id | int16 PCM`. One copy of the framing, the size cap and the address rules, so both engines refuse
the same bad input the same way. No livekit import.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

KIND_JSON = b"J"
KIND_AUDIO = b"A"
MAX_FRAME = 4 * 1024 * 1024
_HEADER = struct.Struct(">IB")
_SID = struct.Struct(">I")


class ProtocolError(ValueError):
    """A malformed frame or message (one line, safe to send back)."""


def json_frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return _HEADER.pack(len(body) + 1, KIND_JSON[0]) + body


def audio_frame(sid: int, pcm: bytes) -> bytes:
    return _HEADER.pack(len(pcm) + 5, KIND_AUDIO[0]) + _SID.pack(sid) + pcm


def audio_payload(sid: int, pcm: bytes) -> bytes:
    """WebSocket binary message body."""
    return _SID.pack(sid) + pcm


def split_audio(payload: bytes) -> tuple[int, bytes]:
    if len(payload) < 4:
        raise ProtocolError("audio message shorter than its stream id")
    return _SID.unpack_from(payload)[0], payload[4:]


def parse_json(data: bytes | str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("message must be a JSON object")
    return obj


async def read_frame(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(kind, payload) from a Unix-socket stream; raises IncompleteReadError at EOF."""
    header = await reader.readexactly(_HEADER.size)
    length, kind = _HEADER.unpack(header)
    if length < 1 or length > MAX_FRAME:
        raise ProtocolError(f"frame length {length} out of range")
    payload = await reader.readexactly(length - 1)
    return bytes([kind]), payload


def parse_address(address: str) -> tuple[str, str]:
    """'unix:///path.sock' → ('unix', path); 'ws://127.0.0.1:PORT' → ('ws', url). A bare path means unix."""
    if address.startswith("unix://"):
        return "unix", address[len("unix://") :]
    if address.startswith(("ws://", "wss://")):
        return "ws", address
    if address.startswith("/") or address.endswith(".sock"):
        return "unix", address
    raise ValueError(f"engine address must be unix:///path.sock or ws://127.0.0.1:PORT (got {address!r})")
