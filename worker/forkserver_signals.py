"""Signals at worker shutdown: the forkserver ignores SIGTERM, and a job process still in prewarm exits 0.

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
from collections.abc import Callable


def in_forkserver() -> bool:
    """True inside multiprocessing's forkserver (started as `python -c 'from multiprocessing.forkserver
    import main; main(...)'`), never in the worker or a test that imports this module."""
    return sys.argv[:1] == ["-c"] and "multiprocessing.forkserver" in sys.modules


def ignore_group_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def exit_cleanly_while_starting() -> Callable[[], None]:
    """Until the returned function is called, SIGUSR1 ends this process with status 0.

    Why: at worker shutdown LiveKit cannot ask a job process that is still in prewarm to shut down (it has
    not answered its initialisation yet), so it kills it: SIGUSR1, then SIGKILL 0.5 s later
    (`SupervisedProc.aclose` → `kill`). SIGUSR1's default ends the process with -10, and the worker logs
    an error for a process that never held a call; issue 30 asks that every job process exits 0. Prewarm
    holds nothing to save, so it ends cleanly instead. The default comes back once prewarm is over: a
    process that fails to shut down later (a stuck call) still shows as killed."""
    if not hasattr(signal, "SIGUSR1"):
        return lambda: None
    previous = signal.getsignal(signal.SIGUSR1)

    def _exit(_signum: int, _frame: object) -> None:
        os._exit(0)  # nothing to flush or close: the process never held a call

    try:
        signal.signal(signal.SIGUSR1, _exit)
    except ValueError:  # not the main thread: leave the default
        return lambda: None

    def restore() -> None:
        signal.signal(signal.SIGUSR1, previous if previous is not None else signal.SIG_DFL)

    return restore


if in_forkserver():
    ignore_group_sigterm()
