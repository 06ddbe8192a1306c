"""What one job process costs before its call starts: memory and prewarm CPU-seconds, Whisper in-process
vs the host speech engine, and each per-process model on its own.

    python -m benchmarks.job_footprint [--repeat 3] [--json PATH]

Job processes are made the way LiveKit makes them on Linux: forked from a forkserver that imported the
registered plugins and LiveKit's own preloads (`livekit.agents.ipc._preload`: the VAD and v1-mini weights,
shared copy-on-write), then running the worker's real `prewarm`. Reported per job process: RSS, USS (memory
only it holds: what one more call adds), PSS, and the CPU-seconds prewarm took (getrusage, so another
process's load changes it little). `parts` loads one model alone in a fresh job process, from the same
forkserver: what each costs if it stays per process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import sys
from collections.abc import Callable
from typing import Any

from benchmarks.cli import emit, print_json


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _mem() -> dict[str, float]:
    import psutil

    m = psutil.Process().memory_full_info()
    return {"rss_mb": m.rss / 1e6, "uss_mb": m.uss / 1e6, "pss_mb": m.pss / 1e6}


def _part(name: str) -> Callable[[], Any]:
    """One of the per-process models `load_components` loads, alone."""
    from worker.settings import get_settings

    settings = get_settings()

    def vads() -> Any:
        from turn_detection import Profile, load_vad, params_for
        from worker.pipeline import turn_options

        return {p: load_vad(params_for(p, turn_options(settings))) for p in Profile}

    def stt() -> Any:
        from worker.pipeline import _prewarm_once, load_stt

        s = load_stt(settings)
        _prewarm_once(s)
        return s

    def tts() -> Any:
        from worker.pipeline import _prewarm_once, load_tts

        t, _ = load_tts(settings)
        _prewarm_once(t)
        return t

    def eot() -> Any:
        from turn_detection.audio_eot import load_model

        return load_model()

    def llm_client() -> Any:
        from worker.pipeline import llm_client

        return llm_client(settings, settings.llm_base_url or "http://127.0.0.1:9/v1")

    def prewarm() -> Any:
        from livekit.agents import JobExecutorType, JobProcess

        from worker.call import prewarm as worker_prewarm

        proc = JobProcess(executor_type=JobExecutorType.PROCESS, user_arguments=None, http_proxy=None)
        worker_prewarm(settings, proc)
        return proc

    return {"vads": vads, "stt": stt, "tts": tts, "eot": eot, "llm_client": llm_client, "prewarm": prewarm}[
        name
    ]


def _job(name: str, options: dict[str, str], out: Any) -> None:
    """Runs in a forked job process: load `name` with these settings options, report what it cost."""
    from worker.settings import load_settings, use_settings

    use_settings(load_settings(**options))  # as the worker hands its job processes their settings
    before_mem, before_cpu = _mem(), _cpu_s()
    held = _part(name)()
    cpu = _cpu_s() - before_cpu
    after = _mem()
    out.put(
        {
            "part": name,
            "cpu_s": round(cpu, 3),
            **{k: round(v, 1) for k, v in after.items()},
            "uss_added_mb": round(after["uss_mb"] - before_mem["uss_mb"], 1),
        }
    )
    del held


def forkserver_context(preload: list[str]) -> Any:
    """A forkserver like the worker's: the registered plugins, Parley's preloads, LiveKit's own."""
    from livekit.agents.plugin import Plugin

    import worker.server  # noqa: F401  (registers the plugins the worker registers)

    ctx = multiprocessing.get_context("forkserver")
    packages = list(dict.fromkeys([p.package for p in Plugin.registered_plugins] + preload))
    ctx.set_forkserver_preload(
        [*packages, "livekit.agents.ipc._preload", "livekit.agents.ipc._preload_freeze"]
    )
    return ctx


def measure(ctx: Any, name: str, options: dict[str, str]) -> dict[str, Any]:
    q = ctx.Queue()
    p = ctx.Process(target=_job, args=(name, options, q))
    p.start()
    result: dict[str, Any] = q.get(timeout=300)
    p.join(30)
    return result


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in rows[0] if isinstance(rows[0][k], int | float)]
    return {"part": rows[0]["part"], **{k: round(statistics.median(r[k] for r in rows), 3) for k in keys}}


def run(repeat: int, parts: list[str], preload: list[str] | None = None) -> dict[str, Any]:
    from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions

    report: dict[str, Any] = {"repeat": repeat, "cores": os.cpu_count()}
    own = {"stt_engine": "process"}
    from worker.server import FORKSERVER_PRELOAD

    report["preload"] = FORKSERVER_PRELOAD if preload is None else preload
    ctx = forkserver_context(report["preload"])
    report["process"] = _median([measure(ctx, "prewarm", own) for _ in range(repeat)])
    report["parts_process"] = [_median([measure(ctx, p, own) for _ in range(repeat)]) for p in parts]
    engine = HostSpeechEngine(HostSpeechEngineOptions(workers=1))
    try:
        host = {"stt_engine": "host", "stt_engine_address": engine.start()}
        # one forkserver serves both modes: each job is handed its settings
        report["host"] = _median([measure(ctx, "prewarm", host) for _ in range(repeat)])
        report["parts_host"] = [_median([measure(ctx, "stt", host) for _ in range(repeat)])]
        import psutil

        pid = engine.pid
        report["rss_mb_engine"] = round(psutil.Process(pid).memory_info().rss / 1e6, 1) if pid else None
    finally:
        engine.close()
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parts", default="vads,stt,tts,eot,llm_client")
    ap.add_argument(
        "--preload",
        help="comma-separated forkserver preload modules instead of the worker's (e.g. "
        "worker.forkserver_signals: the models are then loaded by each job, as before)",
    )
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    preload = None if a.preload is None else [m for m in a.preload.split(",") if m]
    report = run(a.repeat, [p for p in a.parts.split(",") if p], preload)
    sys.exit(emit(report, print_json, a.json))


if __name__ == "__main__":
    main()
