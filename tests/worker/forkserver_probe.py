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


def models() -> None:
    """`models`: a job forked from the worker's forkserver speaks with the inherited voice; the parent
    checks it against a voice of its own."""
    import hashlib

    from plugins.cpu_voice.voice import CpuVoice
    from worker.server import FORKSERVER_PRELOAD

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    q = ctx.Queue()
    child = ctx.Process(target=_speak, args=(q,))
    child.start()
    got = q.get(timeout=120)
    child.join(30)
    own = CpuVoice("heart").synthesize("Hello there, how can I help?")
    print(f"SHARED {got['shared']} VADS {got['vads']}", flush=True)
    print(
        f"SAME {got['digest'] == hashlib.sha1(own.tobytes()).hexdigest()} EXIT {child.exitcode}", flush=True
    )


def _speak(q: object) -> None:
    import hashlib

    from worker import forkserver_shared as fm

    voice = fm.shared_voice("heart")
    pcm = voice.synthesize("Hello there, how can I help?") if voice is not None else b""
    q.put(  # type: ignore[attr-defined]
        {
            "shared": voice is not None,
            "vads": len(fm.vads),
            "digest": hashlib.sha1(bytes(pcm)).hexdigest(),
        }
    )


if __name__ == "__main__":
    models() if sys.argv[1:] == ["models"] else main()
