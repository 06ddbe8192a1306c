"""Many calls at once for minutes: does every call stay healthy, and does the host stay flat?

    python -m benchmarks.load --calls 4 --minutes 10 [--data DIR] [--json PATH] [--out DIR]
    python -m benchmarks.load --livekit --calls 3 --minutes 2 [--capacity]   # benchmarks/load_room.py

Without `--livekit`, N scripted callers repeat the conversation in DIR back to back through the offline
harness in this process (one set of models, as one job process holds; the embedded LLM a shared child):
errors, underruns, v2v, tasks and streams left open, and memory over time (`rss_curve_mb`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from simulator.offline import CallOptions, CallResult, run_call
from worker.memory import release_free_memory, tune_allocator
from worker.settings import SettingsError, load_settings

from . import machine_speed
from .heard import add_listen_arguments, describe
from .load_room import call_figures, slope


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions
    from worker.pipeline import build_call, conversation_prefix, load_components

    settings = load_settings()
    tune_allocator()  # as the worker's prewarm does
    turns = sorted(Path(args.data).glob("*.wav"))
    if not turns:
        raise SystemExit(f"error: no *.wav turns in {args.data}")
    llm_server, llm_url = None, settings.llm_base_url
    slots = max(settings.max_calls, args.calls)
    if not llm_url:  # one slot a call, and the end-of-turn scorer's
        opts = EmbeddedLLMOptions(
            slots + 1, threads=settings.llm_embedded_threads, log_path=settings.llm_embedded_log
        )
        llm_server = EmbeddedLLM(opts)
        llm_url = await asyncio.to_thread(llm_server.start)
        await asyncio.to_thread(llm_server.warm, conversation_prefix(settings))
    results: list[CallResult] = []
    errors: list[str] = []
    rss: list[tuple[float, float]] = []  # (time, MB) of this process and its children (the embedded LLM)

    async def sample() -> None:
        proc = psutil.Process()
        while not stop.is_set():
            mb = proc.memory_info().rss
            for p in proc.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    mb += p.memory_info().rss
            rss.append((time.monotonic() - t0, mb / 1e6))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    async def caller(idx: int) -> None:
        await asyncio.sleep(idx * 2.5)  # stagger the calls like real arrivals
        while time.monotonic() < t0 + args.minutes * 60:
            session, agent = build_call(settings, comp)
            try:
                results.append(await run_call(f"call{idx}", session, agent, turns, CallOptions(settle_s=0.4)))
            except Exception as e:
                errors.append(f"call{idx}: {type(e).__name__}: {str(e)[:160]}")
            await asyncio.to_thread(release_free_memory)  # what the worker does when a call ends

    try:
        comp = load_components(settings, llm_url, llm_slots=slots)  # main thread: plugins register on import
        baseline_tasks = set(asyncio.all_tasks())
        t0, stop = time.monotonic(), asyncio.Event()  # the calls' clock starts once the models are loaded
        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(caller(i) for i in range(args.calls)))
        await asyncio.sleep(2.0)  # let closing sessions finish their cleanup
        stop.set()
        await sampler  # (its own pending wait would otherwise count as a task left behind)
        leaked = list(asyncio.all_tasks() - baseline_tasks)
    finally:
        if llm_server:
            llm_server.close()
    gaps = [g for res in results for _, g in res.speaker.underruns]
    return {
        "calls": args.calls,
        "minutes": args.minutes,
        "livekit": False,  # every call in this one process, models shared: no per-call process to weigh
        **call_figures(results, errors, gaps),
        "leaked_streams": int(getattr(comp.tts, "active_streams", 0)),
        "leaked_tasks": len(leaked),
        "leaked_task_names": sorted({f"{t.get_name()}: {t.get_coro()!r}"[:120] for t in leaked})[:20],
        "rss_mb_max": round(max(r for _, r in rss), 1) if rss else None,
        "rss_slope_mb_per_min": slope(rss),
        "rss_curve_mb": [[round(t, 1), round(r, 1)] for t, r in rss[:: max(1, len(rss) // 120)]],
    }


def _room(args: argparse.Namespace) -> dict[str, Any]:
    from simulator.room_runner import room_unavailable_reason

    from .load_room import run_room_load

    load_settings()  # a bad setting is one line here
    why = room_unavailable_reason()
    if why:
        sys.exit(f"error: no local LiveKit room: {why}")
    speed = machine_speed.measure()  # before the calls: room figures move with the machine
    print(machine_speed.describe(speed), flush=True)
    counter = iter(range(1_000_000))

    def one(calls: int, minutes: float) -> dict[str, Any]:
        out = Path(args.out) / f"capacity-{calls}-{next(counter)}" if args.capacity else Path(args.out)
        return run_room_load(calls, minutes, Path(args.data), out, args.caller_nice, args.listen)

    if not args.capacity:
        return {**one(args.calls, args.minutes or 1.0), "machine_speed": speed}
    from .capacity import CapacityOptions, sweep

    opts = CapacityOptions(max_calls=args.capacity_max, minutes=args.minutes or 2.0)
    return {**sweep(one, opts), "machine_speed": speed}


def _print(report: dict[str, Any]) -> None:
    if "capacity" in report:  # a line per N: (p95, underruns, errors) of each run
        runs = {
            n: [(r["v2v_ms"]["p95"], r["underruns"], r["errors"]) for r in rs]
            for n, rs in report["runs"].items()
        }
        report = {"capacity": report["capacity"], **{f"{n} calls": v for n, v in runs.items()}}
    for k, v in report.items():
        if not isinstance(v, list) and k not in ("replies_heard", "machine_speed", "livekit"):
            print(f"{k.ljust(28)}  {v}")
    if report.get("livekit"):
        print(describe(report["replies_heard"]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n")[0])
    add = ap.add_argument
    add("--calls", type=int, default=4)
    add("--minutes", type=float, default=None, help="per run (default 1; 2 with --capacity)")
    add("--data", default=None, help="caller turns (default: the project's test conversation)")
    add("--json")
    add("--out", default="out/load")
    add("--log-level", default="WARNING")
    add("--livekit", action="store_true", help="through a real local room, one job process a call")
    add("--capacity", action="store_true", help="with --livekit: the sweep of benchmarks/capacity.py")
    add("--capacity-max", type=int, default=8, help="the largest N the capacity sweep tries")
    add("--caller-nice", type=int, default=0, choices=range(20), metavar="0-19", help="with --livekit: "
        "the scripted callers' nice level (real callers are not on the host)")  # fmt: skip
    add_listen_arguments(ap, "with --livekit, after the run")
    args = ap.parse_args(argv)
    if args.data is None:
        from simulator.test_speech import speech_dir

        args.data = str(speech_dir() / "conversation")
    if args.calls < 1 or (args.minutes is not None and args.minutes <= 0):
        sys.exit("error: --calls must be ≥ 1 and --minutes > 0")
    if args.capacity and not args.livekit:
        sys.exit("error: --capacity measures through the room: add --livekit")
    if not args.livekit:
        args.minutes = args.minutes or 1.0
    logging.basicConfig(level=args.log_level)
    try:
        report = _room(args) if args.livekit else asyncio.run(main_async(args))
    except SettingsError as e:
        sys.exit(str(e))
    _print(report)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
