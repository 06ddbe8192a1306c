"""Container health probe for the Parley images, with no tools beyond the Python standard library.

The slim images carry no curl, and the engine listens on a Unix socket, so one small probe serves Docker's
HEALTHCHECK and Kubernetes exec probes alike:

    python deploy/healthcheck.py http://127.0.0.1:8081/                 # worker: LiveKit agents health
    python deploy/healthcheck.py unix:///run/parley/engine/orpheus.sock   # engine: answers `capacity`
    python deploy/healthcheck.py unix:///run/parley/engine/stt.sock       # speech engine: decodes

The engine check says `hello` (with PARLEY_ENGINE_SECRET or the file PARLEY_ENGINE_SECRET_FILE names) and
needs an answer within the deadline: a wedged or frozen engine still accepts connections (the kernel does
that), so a bare connect says nothing about it. The Orpheus engine is asked its `capacity`; the speech
engine (its hello names `multilingual`) decodes half a second of silence, since its socket keeps answering
while hung decoders leave every call deaf (issue 66).

Exit 0 when healthy, 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

TIMEOUT_S = 3.0
_HEADER = struct.Struct(">IB")  # the engine's frame: u32 length (kind byte + payload) | kind byte
_JSON = ord("J")
_AUDIO = ord("A")
PROBE_SAMPLES = 8000  # 0.5 s at 16 kHz


def _engine_secret() -> str:
    path = os.environ.get("PARLEY_ENGINE_SECRET_FILE", "")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    return os.environ.get("PARLEY_ENGINE_SECRET", "")


def _frame(obj: dict[str, object]) -> bytes:
    body = json.dumps(obj).encode()
    return _HEADER.pack(len(body) + 1, _JSON) + body


def _audio_frame(rid: int, pcm: bytes) -> bytes:
    return _HEADER.pack(len(pcm) + 5, _AUDIO) + struct.pack(">I", rid) + pcm


def query_engine(path: str, timeout_s: float) -> dict[str, object]:
    """hello, then `capacity` (Orpheus) or a tiny decode (speech engine): the answer, within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(_frame({"op": "hello", "id": 1, "secret": _engine_secret()}))
        buf = b""
        want = "hello"
        while True:
            while len(buf) < _HEADER.size or len(buf) < 4 + _HEADER.unpack_from(buf)[0]:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {want} answer")
                sock.settimeout(left)
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    raise TimeoutError(f"no {want} answer") from None
                if not data:
                    raise ConnectionError("engine closed the connection")
                buf += data
            length, kind = _HEADER.unpack_from(buf)
            payload, buf = buf[_HEADER.size : 4 + length], buf[4 + length :]
            if kind != _JSON:
                continue
            msg = json.loads(payload)
            op = msg.get("op")
            if op == "error":
                raise ConnectionError(f"engine refused: {msg.get('code', 'error')}")
            if op == "hello" and "multilingual" in msg:  # the speech engine: one real decode
                want = "decode"
                probe = {"op": "decode", "rid": 1, "stream": "healthcheck", "priority": 0, "window_s": 1}
                sock.sendall(_frame(probe) + _audio_frame(1, bytes(2 * PROBE_SAMPLES)))
            elif op == "hello":
                want = "capacity"
                sock.sendall(_frame({"op": "capacity", "id": 2}))
            elif op in ("capacity", "result"):
                return msg


def check(target: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """Return None when `target` answers, else a one-line reason."""
    if target.startswith("unix://"):
        try:
            query_engine(target.removeprefix("unix://"), timeout_s)
        except TimeoutError as err:
            return f"{target}: {err} within {timeout_s:.1f} s (engine wedged or frozen)"
        except (OSError, ValueError) as err:
            return f"{target}: {getattr(err, 'strerror', None) or err}"
        return None
    if target.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(target, timeout=timeout_s) as resp:
                status = int(resp.status)
        except urllib.error.HTTPError as err:
            return f"{target}: HTTP {err.code}"
        except (OSError, urllib.error.URLError) as err:
            return f"{target}: {getattr(err, 'reason', err)}"
        return None if 200 <= status < 300 else f"{target}: HTTP {status}"
    return f"unsupported target {target!r} (use unix:///path.sock or http://host:port/path)"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: healthcheck.py unix:///path.sock | http://host:port/path", file=sys.stderr)
        return 2
    problem = check(argv[0])
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
