"""Many calls at once for minutes: does every call stay healthy, and does the host stay flat?

    python -m benchmarks.load --calls 4 --minutes 10 [--data DIR] [--json PATH] [--out DIR]
    python -m benchmarks.load --livekit --calls 3 --minutes 2 [--capacity] [--caller-nice N]

Without `--livekit`, N scripted callers each repeat the conversation in DIR back to back through the
offline harness in this process (one shared set of models, as one job process would hold; the embedded LLM
a child process shared by all): errors, underruns after first audio, v2v, tasks and streams left open,
memory (this process + children) and CPU over time, and a PNG of latency and memory. With `--livekit`, the
production shape through a real room (benchmarks/load_room.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from simulator.offline import CallOptions, run_call
from worker.memory import release_free_memory, tune_allocator
from worker.settings import SettingsError, load_settings

from . import machine_speed
from .heard import add_listen_arguments, describe

log = logging.getLogger("parley.bench.load")


@dataclass
class LoadStats:
    t0: float
    v2v: list[tuple[float, float]] = field(default_factory=list)  # (time, ms)
    errors: list[str] = field(default_factory=list)
    underruns: list[tuple[float, float]] = field(default_factory=list)  # (time, gap s)
    samples: list[tuple[float, float, float]] = field(default_factory=list)  # (time, rss MB, cpu %)
    conversations: int = 0
    apologies: int = 0


async def _sample(stats: LoadStats, stop: asyncio.Event, every_s: float = 1.0) -> None:
    proc = psutil.Process()
    psutil.cpu_percent(None)
    while not stop.is_set():
        rss = proc.memory_info().rss
        for p in proc.children(recursive=True):  # the embedded LLM
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                continue
        stats.samples.append((time.monotonic() - stats.t0, rss / 1e6, psutil.cpu_percent(None)))
        try:
            await asyncio.wait_for(stop.wait(), every_s)
        except TimeoutError:
            pass


async def _caller(
    idx: int, comp: Any, settings: Any, turns: list[Path], deadline: float, stats: LoadStats
) -> None:
    from worker.pipeline import build_call

    await asyncio.sleep(idx * 2.5)  # stagger the calls like real arrivals
    while time.monotonic() < deadline:
        session, agent = build_call(settings, comp)
        try:
            res = await run_call(f"call{idx}", session, agent, turns, CallOptions(settle_s=0.4))
        except Exception as e:
            stats.errors.append(f"call{idx}: {type(e).__name__}: {str(e)[:160]}")
            continue
        stats.conversations += 1
        await asyncio.to_thread(release_free_memory)  # what the worker does when a call ends
        stats.errors += [f"call{idx}: {e}" for e in res.errors]
        for tr in res.turns:
            if tr.error:
                stats.errors.append(f"call{idx} {tr.file}: {tr.error}")
            if tr.problem:  # an apology or a repeat-request is a failed turn, said politely
                stats.apologies += 1
                stats.errors.append(f"call{idx} {tr.file}: {tr.problem}: {tr.reply_text[:80]!r}")
            if tr.v2v_ms is not None:
                stats.v2v.append((tr.speech_end - stats.t0, tr.v2v_ms))
        stats.underruns += res.speaker.underruns


def _slope_mb_per_min(samples: list[tuple[float, float]]) -> float | None:
    """Least-squares growth of the second half of a run: warm-up excluded, is memory still climbing?"""
    half = samples[len(samples) // 2 :]
    if len(half) < 10:
        return None
    t, mb = np.array(half).T
    return round(float(np.polyfit(t / 60, mb, 1)[0]), 2)


def _pct(vals: list[float], q: float) -> float | None:
    return round(float(np.percentile(vals, q)), 1) if vals else None


def _png(stats: LoadStats, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if stats.v2v:
        t, v = zip(*stats.v2v, strict=True)
        a.plot(np.array(t) / 60, v, ".", ms=4)
    a.set_ylabel("v2v ms")
    a.set_title("Parley load: voice-to-voice per turn and host memory")
    if stats.samples:
        t2, rss, cpu = zip(*stats.samples, strict=True)
        b.plot(np.array(t2) / 60, rss, label="RSS MB (all processes)")
        b.twinx().plot(np.array(t2) / 60, cpu, color="tab:orange", lw=0.5, alpha=0.6, label="CPU %")
    b.set_ylabel("MB")
    b.set_xlabel("minutes")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions
    from worker.pipeline import conversation_prefix, load_components

    settings = load_settings()
    tune_allocator()  # as the worker's prewarm does
    turns = sorted(Path(args.data).glob("*.wav"))
    if not turns:
        raise SystemExit(f"error: no *.wav turns in {args.data}")
    llm_server = None
    llm_url = settings.llm_base_url
    slots = max(settings.max_calls, args.calls)
    if not llm_url:
        llm_server = EmbeddedLLM(
            EmbeddedLLMOptions(
                n_parallel=slots + 1,  # the calls' slots and the end-of-turn scorer's
                threads=settings.llm_embedded_threads,
                log_path=settings.llm_embedded_log,
            )
        )
        llm_url = await asyncio.to_thread(llm_server.start)
        await asyncio.to_thread(llm_server.warm, conversation_prefix(settings))
    try:
        comp = load_components(settings, llm_url, llm_slots=slots)  # main thread: plugins register on import
        baseline_tasks = set(asyncio.all_tasks())
        stats = LoadStats(t0=time.monotonic())
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample(stats, stop))
        deadline = stats.t0 + args.minutes * 60
        await asyncio.gather(*(_caller(i, comp, settings, turns, deadline, stats) for i in range(args.calls)))
        await asyncio.sleep(2.0)  # let closing sessions finish their cleanup
        stop.set()
        await sampler  # (its own pending wait would otherwise count as a task left behind)
        leaked = list(asyncio.all_tasks() - baseline_tasks)
        leaked_tts = int(getattr(comp.tts, "active_streams", 0))
    finally:
        if llm_server:
            llm_server.close()
    v2v = [v for _, v in stats.v2v]
    rss = [(t, r) for t, r, _ in stats.samples]
    third = max(1, len(rss) // 3)
    out = Path(args.out)
    _png(stats, out / "load.png")
    return {
        "calls": args.calls,
        "minutes": args.minutes,
        "livekit": False,  # every call in this one process, models shared: no per-call process to weigh
        "conversations": stats.conversations,
        "turns": len(v2v),
        "errors": len(stats.errors),
        "error_list": stats.errors[:50],
        "apologies": stats.apologies,
        "underruns": len(stats.underruns),
        "underrun_gaps_ms": sorted(round(g * 1000) for _, g in stats.underruns)[-20:],
        "v2v_ms": {"p50": _pct(v2v, 50), "p95": _pct(v2v, 95), "p99": _pct(v2v, 99)},
        "leaked_streams": leaked_tts,
        "leaked_tasks": len(leaked),
        "leaked_task_names": sorted({f"{t.get_name()}: {t.get_coro()!r}"[:120] for t in leaked})[:20],
        "rss_mb_max": round(max(r for _, r in rss), 1) if rss else None,
        "rss_mb_first_last_third": [
            _pct([r for _, r in rss[:third]], 50),
            _pct([r for _, r in rss[-third:]], 50),
        ],
        "rss_slope_mb_per_min": _slope_mb_per_min(rss),
        "cpu_pct_mean": round(float(np.mean([c for *_, c in stats.samples])), 1) if stats.samples else None,
        "rss_curve_mb": [[round(t, 1), round(r, 1)] for t, r in rss[:: max(1, len(rss) // 120)]],
        "png": str(out / "load.png"),
    }


def _room(args: argparse.Namespace) -> dict[str, Any]:
    from simulator.room_runner import room_unavailable_reason

    from .load_room import run_room_load

    load_settings()  # a bad setting is one line here
    why = room_unavailable_reason()
    if why:
        print(f"error: no local LiveKit room: {why}", file=sys.stderr)
        sys.exit(2)
    speed = machine_speed.measure()  # before the calls: room figures move with the machine
    print(machine_speed.describe(speed), flush=True)
    if args.capacity:
        from .capacity import CapacityOptions, sweep

        counter = iter(range(1_000_000))

        def one(calls: int, minutes: float) -> dict[str, Any]:
            out = Path(args.out) / f"capacity-{calls}-{next(counter)}"
            return run_room_load(calls, minutes, Path(args.data), out, args.caller_nice, args.listen)

        opts = CapacityOptions(max_calls=args.capacity_max, minutes=args.minutes or 2.0)
        return {**sweep(one, opts), "machine_speed": speed}
    report = run_room_load(
        args.calls, args.minutes or 1.0, Path(args.data), Path(args.out), args.caller_nice, args.listen
    )
    return {**report, "machine_speed": speed}


ROOM_KEYS = (
    "calls", "conversations", "refused", "not_dispatched", "turns", "errors", "apologies", "underruns",
    "v2v_ms", "jitter_buffer_ms", "rss_mb_per_call_max", "uss_mb_per_call_max", "rss_slope_mb_per_min",
    "rss_slope_mb_per_min_shared", "job_rss_growth_mb_per_min", "job_peak_rss_slope_mb_per_min",
    "rss_mb_engine", "job_processes", "headroom", "cpu_cores", "call_minutes_served", "cpu_s_per_call_minute",
)  # fmt: skip
OFFLINE_KEYS = (
    "calls", "minutes", "conversations", "turns", "errors", "underruns", "v2v_ms", "leaked_streams",
    "leaked_tasks", "rss_mb_max", "rss_mb_first_last_third", "rss_slope_mb_per_min", "cpu_pct_mean",
)  # fmt: skip


def _print(report: dict[str, Any]) -> None:
    if "capacity" in report:
        print(f"{'capacity'.ljust(28)}  {report['capacity']}")
        for n, rows in report["runs"].items():
            runs = ", ".join(
                f"p95 {r['v2v_ms']['p95']} underruns {r['underruns']} errors {r['errors']}" for r in rows
            )
            print(f"{(n + ' calls').ljust(28)}  {runs}")
        return
    for k in ROOM_KEYS if report["livekit"] else OFFLINE_KEYS:
        print(f"{k.ljust(28)}  {report[k]}")
    if report["livekit"]:
        print(f"{'voice pauses'.ljust(28)}  {len(report['voice_pauses_ms'])} (not underruns)")
        print(describe(report["replies_heard"]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=None, help="per run (default 1; 2 with --capacity)")
    ap.add_argument("--data", default=None, help="caller turns (default: the project's test conversation)")
    ap.add_argument("--json")
    ap.add_argument("--out", default="out/load")
    ap.add_argument("--log-level", default="WARNING")
    ap.add_argument(
        "--livekit", action="store_true", help="through a real local room, one job process per call"
    )
    ap.add_argument(
        "--capacity",
        action="store_true",
        help="with --livekit: N = 2, 3, … calls × 3 runs; `capacity` = the largest N whose runs all hold "
        "p95 ≤ 1.5 s and no underrun (benchmarks/capacity.py)",
    )
    ap.add_argument("--capacity-max", type=int, default=8, help="the largest N the capacity sweep tries")
    ap.add_argument(
        "--caller-nice",
        type=int,
        default=0,
        choices=range(20),
        metavar="0-19",
        help="with --livekit: run the scripted callers at this nice level, so the host gets the cores first "
        "(real callers are not on the host); reported as `caller_nice`",
    )
    add_listen_arguments(ap, "with --livekit, after the run")
    args = ap.parse_args(argv)
    if args.data is None:
        from simulator.test_speech import speech_dir

        args.data = str(speech_dir() / "conversation")
    if args.calls < 1 or (args.minutes is not None and args.minutes <= 0):
        print("error: --calls must be ≥ 1 and --minutes > 0", file=sys.stderr)
        sys.exit(2)
    if args.capacity and not args.livekit:
        print("error: --capacity measures through the room: add --livekit", file=sys.stderr)
        sys.exit(2)
    if not args.livekit:
        args.minutes = args.minutes or 1.0
    logging.basicConfig(level=args.log_level)
    try:
        report = _room(args) if args.livekit else asyncio.run(main_async(args))
    except SettingsError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    _print(report)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
