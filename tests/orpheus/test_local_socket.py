"""The engine's Unix socket: a private directory made 0700 before bind, never bare /tmp, no clobbering, the
secret from a file or the environment (never argv), compared as bytes. Real engine servers (scripted ids)."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from pathlib import Path

import pytest

from plugins.local_socket import (
    FrameQueue,
    SocketDirError,
    default_address,
    default_socket_path,
    read_secret,
    secrets_match,
)
from plugins.orpheus.__main__ import main as engine_cli
from plugins.orpheus.client import EngineClient, EngineError
from plugins.orpheus.server import ServerOptions
from plugins.orpheus.tts import DEFAULT_ADDRESS
from tests.orpheus.test_server import start_server


def test_default_socket_is_in_a_per_user_directory_not_bare_tmp(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert default_socket_path().parent.name == f"parley-{os.getuid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_socket_path() == tmp_path / "parley" / "orpheus.sock"
    assert default_address() == f"unix://{tmp_path}/parley/orpheus.sock"
    for address in (DEFAULT_ADDRESS, ServerOptions().address):
        assert Path(address.removeprefix("unix://")).parent != Path("/tmp")


async def test_server_makes_its_socket_directory_0700_and_refuses_one_anyone_can_write(
    test_model: Path, tmp_path: Path
) -> None:
    server = await start_server(test_model, tmp_path, address=f"unix://{tmp_path}/run/parley/e.sock")
    try:
        assert stat.S_IMODE(os.stat(tmp_path / "run" / "parley").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(tmp_path / "run" / "parley" / "e.sock").st_mode) == 0o600
        client = EngineClient(server.bound_address)
        await client.connect()
        assert (await client.capacity(timeout_s=5.0))["ready"] is not None
        await client.close()
    finally:
        await server.close()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # like bare /tmp: anyone could have put their own socket there first
    with pytest.raises(SocketDirError, match="writable by everyone"):
        await start_server(test_model, tmp_path, address=f"unix://{shared}/e.sock")
    team = tmp_path / "team"
    team.mkdir()
    team.chmod(0o770)  # any member of the group could have bound its own socket there first
    with pytest.raises(SocketDirError, match="writable by its group"):
        await start_server(test_model, tmp_path, address=f"unix://{team}/e.sock")


async def test_a_file_that_is_not_a_socket_is_never_replaced(test_model: Path, tmp_path: Path) -> None:
    precious = tmp_path / "e.sock"
    precious.write_text("not a socket")
    with pytest.raises(SocketDirError, match="not a socket"):
        await start_server(test_model, tmp_path, address=f"unix://{precious}")
    assert precious.read_text() == "not a socket"


async def test_non_ascii_secrets_compare_as_bytes(test_model: Path, tmp_path: Path) -> None:
    assert secrets_match("clé", "clé") and not secrets_match("ключ", "clé") and not secrets_match(5, "x")
    server = await start_server(test_model, tmp_path, secret="clé-secrète")
    try:
        bad = EngineClient(server.bound_address, secret="ключ", connect_timeout_s=5.0)
        with pytest.raises(EngineError, match="unauthorized"):
            await bad.connect()
        await bad.close()
        good = EngineClient(server.bound_address, secret="clé-secrète", connect_timeout_s=5.0)
        await good.connect()
        await good.close()
    finally:
        await server.close()


def test_secret_comes_from_a_file_or_the_environment_never_argv(
    monkeypatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARLEY_ENGINE_SECRET", "from-env")
    assert read_secret() == "from-env"
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    assert read_secret(str(secret_file)) == "from-file"
    assert engine_cli(["serve", "--secret", "visible-in-ps", "--address", f"unix://{tmp_path}/x.sock"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--secret-file or PARLEY_ENGINE_SECRET" in err


async def test_frames_queued_together_leave_in_one_write_and_a_reader_that_stops_is_dropped() -> None:
    """Both engines send through FrameQueue: a reader that keeps up gets every frame in order; one that
    stops reading is dropped once its backlog passes the cap, instead of growing the engine's memory."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    _reader, writer = await asyncio.open_unix_connection(sock=theirs)
    peer_reader, peer_writer = await asyncio.open_unix_connection(sock=ours)
    dropped: list[bool] = []
    queue = FrameQueue(writer, 256 * 1024, lambda: bool(dropped), lambda: dropped.append(True))
    for i in range(3):
        queue.put(b"frame%d;" % i)
    await asyncio.sleep(0)  # the loop pass that writes them
    assert await peer_reader.readexactly(21) == b"frame0;frame1;frame2;"
    for _ in range(8):  # 8 MiB that nobody reads: past the socket buffers and the cap
        queue.put(b"x" * (1024 * 1024))
    await asyncio.sleep(0.05)
    assert dropped == [True]
    assert writer.transport.is_closing()
    queue.put(b"after")  # a dropped client is sent nothing more
    assert queue.take() == b""
    peer_writer.close()
