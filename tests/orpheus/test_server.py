"""The engine server and client over real sockets: concurrency, cancel on disconnect, full, hostile input."""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from plugins.orpheus import protocol
from plugins.orpheus.client import EngineClient, EngineError, EngineEvent
from plugins.orpheus.engine import ids
from plugins.orpheus.engine.core import EngineOptions, OrpheusEngine
from plugins.orpheus.engine.snac_decoder import SnacDecoder, load_snac
from plugins.orpheus.server import EngineServer, ServerOptions
from tests.orpheus.scripted import ScriptedBackend, random_frames

FRAMES = 6


async def start_server(
    test_model: Path,
    tmp_path: Path,
    *,
    max_streams: int = 8,
    frames: int = FRAMES,
    step_s: float = 0.0,
    **kw: Any,
) -> EngineServer:
    script = [*random_frames(frames), ids.END_OF_SPEECH]
    engine = OrpheusEngine(
        ScriptedBackend(script, step_s=step_s),
        SnacDecoder(load_snac(test_model / "snac")),
        EngineOptions(max_streams=max_streams, trim_leading_silence=False),
    )
    opts = ServerOptions(address=kw.pop("address", f"unix://{tmp_path}/e.sock"), **kw)
    server = EngineServer(engine, opts)
    await server.start()
    return server


async def speak(client: EngineClient, text: str, voice: str = "tara") -> tuple[bytes, list[EngineEvent]]:
    stream = client.open_stream(voice=voice, request_id="t")
    await stream.push_text(text)
    await stream.end()
    audio, events = b"", []
    async for item in stream:
        if isinstance(item, bytes):
            audio += item
        else:
            events.append(item)
    return audio, events


async def test_many_concurrent_streams_over_a_pooled_unix_connection(
    test_model: Path, tmp_path: Path
) -> None:
    server = await start_server(test_model, tmp_path, step_s=0.002)
    client = EngineClient(server.bound_address, pool_size=2)
    await client.connect()
    results = await asyncio.wait_for(
        asyncio.gather(*(speak(client, f"Hello number {i}, how are you?") for i in range(6))), 60
    )
    for audio, events in results:
        assert [e.type for e in events] == ["opened", "first_audio", "done"]
        assert len(audio) == 2 * FRAMES * ids.FRAME_SAMPLES * 2  # two pieces, FRAMES frames each, int16
        assert events[-1].data["frames"] == 2 * FRAMES
    cap = await client.capacity()
    assert cap["ready"] and cap["active_streams"] == 0 and cap["max_streams"] == 8
    await client.close()
    await server.close()


async def test_dropped_client_cancels_its_generation_at_once(test_model: Path, tmp_path: Path) -> None:
    server = await start_server(test_model, tmp_path, frames=500, step_s=0.01)
    client = EngineClient(server.bound_address)
    await client.connect()
    stream = client.open_stream()
    await stream.push_text("A long long sentence to say.")
    await stream.flush()
    async for item in stream:
        if isinstance(item, EngineEvent) and item.type == "first_audio":
            break
    assert server.engine.backend.active == 1
    await client.close()  # the job process died / hung up
    for _ in range(100):
        if server.engine.backend.active == 0 and not server.engine.streams:
            break
        await asyncio.sleep(0.01)
    assert server.engine.backend.active == 0 and not server.engine.streams
    await server.close()


async def test_full_engine_refuses_with_a_clear_error(test_model: Path, tmp_path: Path) -> None:
    server = await start_server(test_model, tmp_path, max_streams=2, frames=200, step_s=0.01)
    client = EngineClient(server.bound_address)
    await client.connect()
    a, b = client.open_stream(), client.open_stream()
    c = client.open_stream()
    events = [item async for item in c]
    assert len(events) == 1 and isinstance(events[0], EngineEvent)
    assert events[0].type == "error" and events[0].code == "full" and "2/2" in events[0].data["message"]
    await a.cancel()
    await b.cancel()
    assert [e.data.get("reason") for e in [x async for x in a] if isinstance(e, EngineEvent)][
        -1
    ] == "cancelled"
    await client.close()
    await server.close()


async def _raw(path: str):  # type: ignore[no-untyped-def]
    reader, writer = await asyncio.open_unix_connection(path)

    async def send(obj: Any) -> None:
        writer.write(protocol.json_frame(obj) if isinstance(obj, dict) else obj)
        await writer.drain()

    async def recv_json() -> dict[str, Any]:
        while True:
            kind, payload = await asyncio.wait_for(protocol.read_frame(reader), 30)
            if kind == protocol.KIND_JSON:
                return protocol.parse_json(payload)

    return reader, writer, send, recv_json


async def test_hostile_messages_get_one_line_errors_and_the_server_stays_up(
    test_model: Path, tmp_path: Path
) -> None:
    server = await start_server(test_model, tmp_path)
    path = server.target
    _, writer, send, recv = await _raw(path)
    bad_json = struct.pack(">IB", 10, ord("J")) + b"{not json"
    hostile: list[Any] = [
        bad_json,
        {"op": "launch"},
        {"op": "text", "sid": 5, "text": "hi"},
        {"op": "open", "sid": "x"},
        {"op": "open", "sid": 1, "voice": "nobody"},
        {"op": "open", "sid": 2, "voice": ["tara"]},
    ]
    for msg in hostile:
        await send(msg)
        reply = await recv()
        assert reply.get("type") == "error" or reply["op"] == "error", reply
        assert "\n" not in reply["message"] and reply["message"]
    await send({"op": "open", "sid": 3})
    assert (await recv())["type"] == "opened"
    await send({"op": "text", "sid": 3, "text": 12})
    assert (await recv())["code"] == "bad_request"
    await send({"op": "text", "sid": 3, "text": "x" * 30000})
    assert (await recv())["code"] == "bad_request"
    for text in ("\x00\x07😀 <smile> ", "こんにちは ", "Hello there friend."):
        await send({"op": "text", "sid": 3, "text": text})
        await send({"op": "flush", "sid": 3})
    await send({"op": "end", "sid": 3})
    events = []
    while not events or events[-1]["type"] not in ("done", "error"):
        events.append(await recv())
    assert events[-1]["type"] == "done" and events[-1]["frames"] == FRAMES
    assert events[-1]["dropped_pieces"] == 2 and events[-1]["utterances"] == 1
    writer.write(struct.pack(">IB", 2**31, ord("J")))  # a frame length past the limit: connection closed
    await writer.drain()
    writer.close()
    client = EngineClient(server.bound_address)  # and the server still serves others
    await client.connect()
    audio, evs = await speak(client, "Still here.")
    assert evs[-1].type == "done" and len(audio) == FRAMES * ids.FRAME_SAMPLES * 2
    await client.close()
    await server.close()


async def test_websocket_needs_the_shared_secret(test_model: Path, tmp_path: Path) -> None:
    server = await start_server(test_model, tmp_path, address="ws://127.0.0.1:0", secret="s3cret")
    bad = EngineClient(server.bound_address, secret="wrong")
    with pytest.raises(EngineError, match="unauthorized"):
        await bad.connect()
    await bad.close()
    client = EngineClient(server.bound_address, secret="s3cret")
    await client.connect()
    audio, events = await speak(client, "Over a loopback web socket.")
    assert events[-1].type == "done" and len(audio) == FRAMES * ids.FRAME_SAMPLES * 2
    assert np.frombuffer(audio, dtype=np.int16).std() > 0
    await client.close()
    await server.close()
    with pytest.raises(ValueError, match="loopback"):
        EngineServer(server.engine, replace(server.options, address="ws://0.0.0.0:1"))


async def test_http_capacity_metrics_and_health(test_model: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = await start_server(test_model, tmp_path, http_port=port)
    client = EngineClient(server.bound_address)
    await client.connect()
    await speak(client, "Count me in the metrics.")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/capacity") as r:
            cap = json.loads(await r.text())
        async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
            metrics = await r.text()
        async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
            assert r.status == 200
    assert cap["ready"] and cap["free"] == 8
    for name in (
        "orpheus_active_streams",
        "orpheus_ttfb_ms_count 1.0",
        "orpheus_snac_batch_size",
        "orpheus_audio_tokens",
    ):
        assert name in metrics
    await client.close()
    await server.close()


async def test_client_streams_end_when_the_engine_goes_away(test_model: Path, tmp_path: Path) -> None:
    server = await start_server(test_model, tmp_path, frames=500, step_s=0.01)
    client = EngineClient(server.bound_address)
    await client.connect()
    stream = client.open_stream()
    await stream.push_text("Keep talking for a while please.")
    await stream.flush()
    await server.close()
    items = await asyncio.wait_for(_drain(stream), 10)
    assert isinstance(items[-1], EngineEvent) and items[-1].type in ("error", "done")
    with pytest.raises(EngineError):
        client.open_stream()
    await client.close()


async def _drain(stream):  # type: ignore[no-untyped-def]
    return [x async for x in stream]


async def test_unix_socket_with_a_secret_refuses_a_wrong_one(test_model: Path, tmp_path: Path) -> None:
    server = await start_server(test_model, tmp_path, secret="k")
    bad = EngineClient(server.bound_address, secret="nope")
    with pytest.raises(EngineError, match="unauthorized"):
        await bad.connect()
    await bad.close()
    good = EngineClient(server.bound_address, secret="k")
    await good.connect()
    assert (await good.capacity())["ready"]
    await good.close()
    await server.close()
