"""Where an engine's Unix socket lives, and how its directory and secret are made safe (the Orpheus TTS
engine and the host speech engine both serve on one).

A socket in bare /tmp can be created first by any local user (who then receives the worker's text, or
answers with their own audio), and a socket chmod-ed after bind is open in between. So the socket goes
in a private directory: `$XDG_RUNTIME_DIR/parley/` when there is one, else `/tmp/parley-<uid>/`, created
0700 before anything binds in it, and refused when someone else owns it or its group or anyone else may
write to it; the socket itself is 0600 (the engine and the worker run as one user). The shared secret
comes from a file or the environment, never the command line (`ps` shows argv to everyone).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SECRET_ENV = "PARLEY_ENGINE_SECRET"


class SocketDirError(OSError):
    """The socket's directory is not private; the message is one line for the operator."""


def default_socket_path(name: str = "orpheus.sock") -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "parley" / name
    return Path(tempfile.gettempdir()) / f"parley-{os.getuid()}" / name


def default_address(name: str = "orpheus.sock") -> str:
    return f"unix://{default_socket_path(name)}"


def prepare_socket_dir(sock: Path) -> None:
    """Create the socket's directory 0700 (before bind), or check an existing one is safe to bind in."""
    ensure_private_dir(sock.parent)
    try:
        existing = os.lstat(sock)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(existing.st_mode):
        raise SocketDirError(f"{sock} exists and is not a socket; not replacing it")
    sock.unlink()  # a stale socket of an earlier run


SOCKET_MODE = 0o600


def ensure_private_dir(parent: Path) -> None:
    """Create `parent` 0700, or check an existing one: a plain directory of ours nobody else may write to."""
    try:
        parent.mkdir(mode=0o700, parents=True)
        os.chmod(parent, 0o700)  # mkdir's mode passes through the umask
    except FileExistsError:
        pass
    st = os.lstat(parent)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SocketDirError(f"engine socket directory {parent} is not a plain directory")
    if st.st_uid not in (os.getuid(), 0):
        raise SocketDirError(f"engine socket directory {parent} belongs to another user (uid {st.st_uid})")
    if st.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
        who = "everyone" if st.st_mode & stat.S_IWOTH else "its group"
        raise SocketDirError(
            f"engine socket directory {parent} is writable by {who}; use a private one (0700, "
            f"default {default_socket_path().parent})"
        )


def read_secret(secret_file: str = "") -> str:
    """The shared secret: from `secret_file` when given, else PARLEY_ENGINE_SECRET, else none."""
    if secret_file:
        return Path(secret_file).read_text(encoding="utf-8").strip()
    return os.environ.get(SECRET_ENV, "")


def secrets_match(given: object, expected: str) -> bool:
    """Constant-time comparison on bytes: any string (non-ASCII too) compares; anything else never does."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def handshake_refusal(msg: dict[str, Any], secret: str) -> dict[str, Any] | None:
    """An engine connection's first message must be `hello` with the secret: None when it is, else the
    `unauthorized` error to send before closing (both engines answer a bad client the same way)."""
    if msg.get("op") == "hello" and secrets_match(msg.get("secret", ""), secret):
        return None
    return {"op": "error", "id": msg.get("id"), "code": "unauthorized", "message": "bad or missing secret"}


class FrameQueue:
    """A client connection's outgoing frames. Frames queued in one event-loop pass leave in one write (one
    syscall, not one per audio chunk or result), and a client whose unread backlog passes `max_backlog`
    bytes is dropped (`on_overrun`), so a reader that stopped reading cannot grow the engine's memory."""

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        max_backlog: int,
        closed: Callable[[], bool],
        on_overrun: Callable[[], None],
    ) -> None:
        self._writer = writer
        self._max_backlog = max_backlog
        self._closed = closed
        self._on_overrun = on_overrun
        self._frames: list[bytes] = []

    def put(self, frame: bytes) -> None:
        if self._closed():
            return
        if not self._frames:
            asyncio.get_running_loop().call_soon(self.flush)
        self._frames.append(frame)

    def flush(self) -> None:
        if self._closed() or not self._frames:
            self._frames.clear()
            return
        self._writer.write(self.take())
        if self._writer.transport.get_write_buffer_size() > self._max_backlog:
            log.warning("client too far behind; dropping its connection")
            self._on_overrun()
            self._writer.transport.abort()  # drop the backlog too

    def take(self) -> bytes:
        """Everything queued and not yet written, now off the queue (a last write before closing)."""
        data = b"".join(self._frames)
        self._frames.clear()
        return data
