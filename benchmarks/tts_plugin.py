"""The `--via plugin` half of `python -m benchmarks.tts`: N concurrent replies through the LiveKit plugin.

    python -m benchmarks.tts_plugin --concurrency 4 [--rounds 5] [--address unix:///tmp/e.sock] [--json F]

Each reply is a few sentences pushed into `OrpheusTTS.stream()` the way the agent does; its audio is
consumed as LiveKit would. Plugin TTFB = first piece sent → first frame out of the plugin (what LiveKit's
TTFB metric measures); engine TTFB = the engine's own first text → first audio, from its `first_audio`
event; their difference is what the plugin costs. With no `--address` an engine is started on CPU with
the tiny random test model (`python -m plugins.orpheus serve`) and stopped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.cli import emit, fail
from benchmarks.tts import LocalEngine, count_underruns
from benchmarks.tts import pct as _pct

REPLIES = [
    "Sure, I can help with that. Your table for two is booked at seven. Anything else?",
    "Let me check. The store opens at nine tomorrow, and closes at six in the evening.",
    "Thanks for waiting. Your order shipped this morning, so it should arrive on Friday.",
    "Of course. I have moved your appointment to Tuesday afternoon. See you then!",
]


@dataclass(frozen=True)
class PluginBenchOptions:
    address: str
    secret: str = ""
    concurrency: int = 1
    rounds: int = 5
    voice: str = "tara"
    stream_timeout_s: float = 120.0
    chain: bool = False  # measure through the engine → CPU voice fallback chain the worker uses


@dataclass
class StreamResult:
    plugin_ttfb_ms: float | None = None
    engine_ttfb_ms: float | None = None
    audio_s: float = 0.0
    synth_s: float = 0.0
    underruns: int = 0
    error: str | None = None
    arrivals: list[tuple[float, float]] = field(default_factory=list)  # (wall time, frame seconds)


async def _one_reply(tts: Any, text: str, timeout_s: float) -> StreamResult:
    from livekit.agents import APIConnectOptions

    res = StreamResult()
    stream = tts.stream(conn_options=APIConnectOptions(max_retry=0, timeout=timeout_s))
    try:
        stream.push_text(text)
        stream.end_input()
        first_at: float | None = None
        async with asyncio.timeout(timeout_s):
            async for ev in stream:
                now = time.perf_counter()
                if first_at is None:
                    first_at = now
                res.arrivals.append((now, ev.frame.duration))
                res.audio_s += ev.frame.duration
        orpheus = getattr(stream, "inner", stream)  # the chain's stream wraps the Orpheus one
        sent_at = getattr(orpheus, "piece_sent_at", None)
        if sent_at is None or first_at is None:
            raise RuntimeError("the reply was not spoken by the Orpheus engine")
        res.plugin_ttfb_ms = (first_at - sent_at) * 1000
        res.engine_ttfb_ms = orpheus.engine_ttfb_ms
        res.synth_s = time.perf_counter() - sent_at
        res.underruns = count_underruns(res.arrivals)
    except Exception as e:  # one failed reply is counted, the run goes on
        res.error = f"{type(e).__name__}: {e}".splitlines()[0]
    finally:
        await stream.aclose()
    return res


async def _one_cancel(tts: Any, text: str, timeout_s: float) -> float | None:
    """Barge-in: close a reply once its audio plays; ms until the engine confirms the stream is stopped."""
    from livekit.agents import APIConnectOptions

    stream = tts.stream(conn_options=APIConnectOptions(max_retry=0, timeout=timeout_s))
    stream.push_text(text)
    stream.end_input()
    try:
        async with asyncio.timeout(timeout_s):
            await anext(aiter(stream))
    except Exception:
        await stream.aclose()
        return None
    engine = getattr(getattr(stream, "inner", stream), "engine_stream", None)
    t0 = time.perf_counter()
    await stream.aclose()
    while engine is not None and not engine.finished and time.perf_counter() - t0 < 5.0:
        await asyncio.sleep(0.0005)
    if engine is None or engine.final_event is None or engine.final_event.data.get("reason") != "cancelled":
        return None
    return (time.perf_counter() - t0) * 1000


async def run_plugin_bench(opts: PluginBenchOptions) -> dict[str, Any]:
    """The benchmark's JSON keys (DESIGN §6) for `--via plugin`."""
    from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS

    orpheus = OrpheusTTS(OrpheusOptions(address=opts.address, secret=opts.secret, voice=opts.voice))
    voice: Any = orpheus
    if opts.chain:
        from plugins.cpu_voice import CpuVoiceTTS
        from plugins.fallback_tts import FallbackTTS

        voice = FallbackTTS(orpheus, CpuVoiceTTS())
    await voice.warm_up()
    await _one_reply(voice, "Warming up.", opts.stream_timeout_s)  # first-use costs are not the plugin's
    results: list[StreamResult] = []
    for r in range(opts.rounds):
        batch = [
            _one_reply(voice, REPLIES[(r + i) % len(REPLIES)], opts.stream_timeout_s)
            for i in range(opts.concurrency)
        ]
        results += await asyncio.gather(*batch)
    cancels = [
        await _one_cancel(voice, REPLIES[i % len(REPLIES)], opts.stream_timeout_s) for i in range(opts.rounds)
    ]
    cancel_ms = [c for c in cancels if c is not None]
    leaked = voice.active_streams
    await voice.aclose()
    ok = [x for x in results if x.error is None and x.plugin_ttfb_ms is not None]
    plugin = [x.plugin_ttfb_ms for x in ok if x.plugin_ttfb_ms is not None]
    engine = [x.engine_ttfb_ms for x in ok if x.engine_ttfb_ms is not None]
    overhead = [
        x.plugin_ttfb_ms - x.engine_ttfb_ms
        for x in ok
        if x.plugin_ttfb_ms is not None and x.engine_ttfb_ms is not None
    ]
    rtfs = [x.synth_s / x.audio_s for x in ok if x.audio_s > 0]
    return {
        "via": "plugin+fallback-chain" if opts.chain else "plugin",
        "concurrency": opts.concurrency,
        "streams": len(results),
        "ttfb_ms": {"p50": _pct(plugin, 50), "p99": _pct(plugin, 99)},
        "engine_ttfb_ms": {"p50": _pct(engine, 50), "p99": _pct(engine, 99)},
        "plugin_overhead_ms": {
            "p50": _pct(overhead, 50),
            "p95": _pct(overhead, 95),
            "max": round(max(overhead), 2) if overhead else None,
        },
        "cancel_ms": {"p50": _pct(cancel_ms, 50), "p95": _pct(cancel_ms, 95)},
        "rtf": round(statistics.median(rtfs), 4) if rtfs else None,
        "underruns": sum(x.underruns for x in ok),
        "errors": sum(1 for x in results if x.error is not None),
        "error_messages": sorted({x.error for x in results if x.error})[:5],
        "leaked_streams": leaked,
    }


def print_table(report: dict[str, Any]) -> None:
    rows = [
        ("streams", report["streams"]),
        ("plugin TTFB p50 / p99 ms", f"{report['ttfb_ms']['p50']} / {report['ttfb_ms']['p99']}"),
        (
            "engine TTFB p50 / p99 ms",
            f"{report['engine_ttfb_ms']['p50']} / {report['engine_ttfb_ms']['p99']}",
        ),
        (
            "plugin overhead p50 / p95 / max ms",
            " / ".join(str(report["plugin_overhead_ms"][k]) for k in ("p50", "p95", "max")),
        ),
        (
            "barge-in → engine stopped p50 / p95 ms",
            f"{report['cancel_ms']['p50']} / {report['cancel_ms']['p95']}",
        ),
        ("rtf (median)", report["rtf"]),
        ("underruns", report["underruns"]),
        ("errors", report["errors"]),
    ]
    print(f"TTS via {report['via']}, concurrency {report['concurrency']}")
    for name, value in rows:
        print(f"  {name:<40} {value}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tts_plugin", description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5, help="replies per concurrent slot")
    p.add_argument("--address", default="", help="a running engine (default: start one on CPU)")
    p.add_argument("--secret", default="")
    p.add_argument("--voice", default="tara")
    p.add_argument("--chain", action="store_true", help="through the engine → CPU voice fallback chain")
    p.add_argument("--json", default="", help="write the report here")
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.rounds < 1:
        print("error: --concurrency and --rounds must be at least 1", file=sys.stderr)
        return 2
    import logging

    logging.basicConfig(level=logging.WARNING)
    engine = None
    address = args.address
    try:
        if not address:
            engine = LocalEngine(["--max-streams", str(max(2, args.concurrency))])
            engine.wait_ready()
            address = engine.address
        opts = PluginBenchOptions(
            address, args.secret, args.concurrency, args.rounds, args.voice, chain=args.chain
        )
        report = asyncio.run(run_plugin_bench(opts))
    except (RuntimeError, OSError, ValueError) as e:
        return fail(e, 1)
    finally:
        if engine is not None:
            engine.stop()
    code = emit(report, print_table, args.json)
    return code or (0 if report["errors"] == 0 else 1)


if __name__ == "__main__":
    sys.exit(main())
