"""Run as a script in its own process group: a forkserver child, then SIGTERM to the whole group (what a
service manager's stop does). Prints the child's exit code as multiprocessing reports it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time


def main() -> None:
    # this script stands for the worker, which handles SIGTERM itself (LiveKit's CLI: a Python handler, so
    # the forkserver it execs starts with SIGTERM's default, as in the worker)
    signal.signal(signal.SIGTERM, lambda *_: None)
    ctx = multiprocessing.get_context("forkserver")
    if len(sys.argv) > 1:
        ctx.set_forkserver_preload(sys.argv[1:])
    child = ctx.Process(target=_job)
    child.start()
    time.sleep(1.0)  # the job is running (it ignores SIGTERM, as LiveKit's job processes do)
    os.killpg(os.getpgid(0), signal.SIGTERM)
    child.join(10)
    print(f"EXIT {child.exitcode}", flush=True)


def _job() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # job_proc_lazy_main does this in every job process
    time.sleep(2.0)


if __name__ == "__main__":
    main()
