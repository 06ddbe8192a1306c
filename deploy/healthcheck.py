"""Container health probe for the Parley images, with no tools beyond the Python standard library.

The slim images carry no curl, and the engine listens on a Unix socket, so one small probe serves Docker's
HEALTHCHECK and Kubernetes exec probes alike:

    python deploy/healthcheck.py http://127.0.0.1:8081/          # worker: LiveKit agents health endpoint
    python deploy/healthcheck.py unix:///run/parley/orpheus.sock   # engine: the socket accepts connections

Exit 0 when healthy, 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 3.0


def check(target: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """Return None when `target` answers, else a one-line reason."""
    if target.startswith("unix://"):
        path = target.removeprefix("unix://")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            try:
                sock.connect(path)
            except OSError as err:
                return f"{target}: {err.strerror or err}"
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
