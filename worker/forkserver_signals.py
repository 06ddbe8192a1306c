"""Imported once in LiveKit's forkserver (AgentServer `preload_modules`): it ignores SIGTERM there.

Why job processes exited 255 at worker shutdown: `kill -TERM -<group>` (systemd's control-group stop, the
benchmarks' stack, a terminal) reaches every process of the worker's group. LiveKit's job processes ignore
SIGTERM and exit 0 on the worker's shutdown request, but multiprocessing's forkserver, which forked them and
alone can report their exit status, keeps SIGTERM's default and dies; the worker then reads 255 for every
job ("perhaps the forkserver process itself got killed", multiprocessing/popen_forkserver.py). Ignoring it
in the forkserver lets the worker's own graceful shutdown finish and each job report its real status. The
forkserver still exits when the worker does (its pipe from the worker closes).
"""

from __future__ import annotations

import signal
import sys


def in_forkserver() -> bool:
    """True inside multiprocessing's forkserver (started as `python -c 'from multiprocessing.forkserver
    import main; main(...)'`), never in the worker or a test that imports this module."""
    return sys.argv[:1] == ["-c"] and "multiprocessing.forkserver" in sys.modules


def ignore_group_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


if in_forkserver():
    ignore_group_sigterm()
