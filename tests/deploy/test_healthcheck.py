"""deploy/healthcheck.py against a real Unix socket and a real HTTP server on loopback."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.healthcheck import check, main


def test_unix_socket_that_accepts_but_never_answers_is_unhealthy(tmp_path: Path) -> None:
    """What a frozen or wedged engine looks like from outside: the kernel accepts, nobody answers. (The real
    engine, answering and then frozen, is in tests/tts_plugin/test_engine_freeze.py.)"""
    path = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        problem = check(f"unix://{path}", timeout_s=0.3)
        assert problem is not None and "no hello answer within 0.3 s" in problem


def test_missing_socket_is_unhealthy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = f"unix://{tmp_path}/absent.sock"
    assert check(target)
    assert main([target]) == 1
    assert capsys.readouterr().err.count("\n") == 1


@pytest.fixture
def http_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/" else 503)
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_status_decides(http_server: str) -> None:
    assert check(f"{http_server}/") is None
    assert check(f"{http_server}/down") == f"{http_server}/down: HTTP 503"


def test_closed_port_and_bad_target_are_unhealthy() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert check(f"http://127.0.0.1:{port}/", timeout_s=1.0)
    assert "unsupported target" in (check("tcp://x") or "")
    assert main([]) == 2
