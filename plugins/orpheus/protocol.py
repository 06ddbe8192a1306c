"""The engine wire protocol, shared by server and client. Two transports, same messages:

- Unix socket (default): frames of `u32 big-endian length | kind byte | payload`; kind `J` = UTF-8 JSON
  object, kind `A` = `u32 stream id | int16 PCM 24 kHz mono`.
- Loopback WebSocket: text message = JSON object, binary message = `u32 stream id | PCM`.

Client → server ops: hello{secret}, open{sid, voice, language?, request_id?}, text{sid, text}, flush{sid},
end{sid}, cancel{sid}, capacity{id}, ping{id}. Server → client: hello{ok, capacity}, event{sid, type:
opened | first_audio | done | error, ...}, capacity{id, ...}, pong{id}, error{code, message} (a bad message;
the connection stays up). Audio for a stream arrives in order, before its done event.
"""

from __future__ import annotations

# the framing is shared with the Whisper speech engine (plugins/wire.py): one copy, one set of caps
from plugins.wire import (
    KIND_AUDIO,
    KIND_JSON,
    MAX_FRAME,
    ProtocolError,
    audio_frame,
    audio_payload,
    json_frame,
    parse_address,
    parse_json,
    read_frame,
    split_audio,
)

__all__ = [
    "KIND_AUDIO",
    "KIND_JSON",
    "MAX_FRAME",
    "ProtocolError",
    "audio_frame",
    "audio_payload",
    "json_frame",
    "parse_address",
    "parse_json",
    "read_frame",
    "split_audio",
]
