"""Signals at worker shutdown: the forkserver ignores SIGTERM, and a job process still starting exits 0.

Imported once in LiveKit's forkserver (AgentServer `preload_modules`): it ignores SIGTERM there.

Why job processes exited 255 at worker shutdown: `kill -TERM -<group>` (systemd's control-group stop, the
benchmarks' stack, a terminal) reaches every process of the worker's group. LiveKit's job processes ignore
SIGTERM and exit 0 on the worker's shutdown request, but multiprocessing's forkserver, which forked them and
alone can report their exit status, keeps SIGTERM's default and dies; the worker then reads 255 for every
job ("perhaps the forkserver process itself got killed", multiprocessing/popen_forkserver.py). Ignoring it
in the forkserver lets the worker's own graceful shutdown finish and each job report its real status. The
forkserver still exits when the worker does (its pipe from the worker closes).
"""

from __future__ import annotations

import os
import signal
import sys


def in_forkserver() -> bool:
    """True inside multiprocessing's forkserver (started as `python -c 'from multiprocessing.forkserver
    import main; main(...)'`), never in the worker or a test that imports this module."""
    return sys.argv[:1] == ["-c"] and "multiprocessing.forkserver" in sys.modules


def ignore_group_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _exit_cleanly(_signum: int, _frame: object) -> None:
    os._exit(0)  # nothing to flush or close: the process never held a call


def exit_cleanly_until_started() -> None:
    """From now until `started()`, SIGUSR1 ends this process with status 0.

    Why: at worker shutdown LiveKit cannot ask a job process that has not finished starting (forked, its
    imports, prewarm) to shut down, since it has not answered its initialisation yet, so it kills it:
    SIGUSR1, then SIGKILL 0.5 s later (`SupervisedProc.aclose` → `kill`). SIGUSR1's default ends the process
    with -10, and the worker logged an error for a process that never held a call; issue 30 asks that every
    job process exits 0. A process still starting holds nothing to save, so it ends cleanly instead. Set in
    the forkserver, so every job process is born with it, and again at prewarm (other start methods)."""
    if not hasattr(signal, "SIGUSR1"):
        return
    try:
        signal.signal(signal.SIGUSR1, _exit_cleanly)
    except ValueError:  # not the main thread: leave the default
        pass


def started() -> None:
    """Prewarm is over: SIGUSR1 gets its default back, so a process that later fails to shut down (a stuck
    call) still shows as killed."""
    if hasattr(signal, "SIGUSR1") and signal.getsignal(signal.SIGUSR1) is _exit_cleanly:
        try:
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        except ValueError:
            pass


if in_forkserver():
    ignore_group_sigterm()
    exit_cleanly_until_started()
