"""Orpheus TTS under concurrency (DESIGN §6): TTFB, real-time factor, underruns, errors, engine CPU.

    python -m benchmarks.tts --concurrency 4 [--rounds 2] [--via engine|plugin] [--address ADDR] [--json F]
    python -m benchmarks.tts --overhead --concurrency 128 [--seconds 10] [--standin-speed 1.0] [--json F]

`--via engine` (default): N concurrent streams, each a few sentences, through the engine client; with no
`--address` an engine server (`python -m plugins.orpheus serve`, tiny random model on CPU unless model flags
say otherwise) is started and stopped. TTFB = first text sent → first PCM received; RTF = time from first text
to the last audio / audio duration (median over streams); underruns = gaps a real-time player would hear after
the first audio. `--via plugin` runs the same replies through the LiveKit plugin (`OrpheusTTS.stream()`, as
the agent uses it; `--chain` through the engine → CPU voice fallback chain): TTFB = first piece sent → first
frame out of the plugin, beside the engine's own first text → first audio (its `first_audio` event); their
difference is what the plugin costs. It also closes a reply once its audio plays, as a barge-in does, and
times until the engine confirms the stream stopped.

`--overhead` replaces both model stages with zero-cost stand-ins (`--backend standin --snac-dir standin`,
named as such and used only here) feeding valid token streams at 82 tokens/s per stream (× `--standin-speed`),
and reports the engine process's own CPU time (user + system, all threads) per audio token over a steady
window. At speed 1.0 a stream's audio can never get ahead of playback (a frame leaves only once the two after
it exist), so any stall of the host is an underrun; 1.2 is the rate a backend held to the capacity rule's
20 % margin delivers.
On a GPU host point `--address` at the real engine to measure real TTFB at scale.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.cli import emit, fail, percentiles
from plugins.local_socket import default_socket_path
from plugins.orpheus.client import EngineClient, EngineEvent
from worker.llm_server import free_port

SAMPLE_RATE = 24000
STREAM_TIMEOUT_S = 300.0
REPLIES = [
    "Sure, I can help with that. Your table for two is booked at seven. Anything else?",
    "Let me check. The store opens at nine tomorrow, and closes at six in the evening.",
    "Thanks for waiting. Your order shipped this morning, so it should arrive on Friday.",
    "Of course. I have moved your appointment to Tuesday afternoon. See you then!",
]
# --overhead: long sentences keep every stand-in stream busy for the whole measuring window
LONG_REPLY = " ".join(
    [
        "This is a long sentence that keeps the stream talking for a good while so that we can measure it.",
        "Here is another sentence that is nearly as long, and it keeps going for quite some time as well.",
        "Then a fourth one follows, so that a faster stand-in still talks past the end of the window.",
        "And one more that closes the reply after a long and steady stretch of speech from this voice.",
    ]
)


@dataclass
class StreamStats:
    ttfb_ms: float | None = None
    engine_ttfb_ms: float | None = None
    audio_s: float = 0.0
    synth_s: float = 0.0
    underruns: int = 0
    error: str | None = None
    arrivals: list[tuple[float, float]] = field(default_factory=list)


def count_underruns(arrivals: list[tuple[float, float]]) -> int:
    """Chunks arriving after everything before them has already played (a real-time player would stall)."""
    gaps = 0
    play_end: float | None = None
    for t, dur in arrivals:
        if play_end is not None and t > play_end + 1e-3:
            gaps += 1
        play_end = (t if play_end is None else max(play_end, t)) + dur
    return gaps


async def one_stream(
    client: EngineClient, text: str, voice: str, timeout_s: float = STREAM_TIMEOUT_S
) -> StreamStats:
    st = StreamStats()
    stream = client.open_stream(voice=voice, request_id="bench")
    t0 = time.perf_counter()
    try:
        await stream.push_text(text)
        await stream.end()
        async with asyncio.timeout(timeout_s):
            async for item in stream:
                now = time.perf_counter()
                if isinstance(item, bytes):
                    if st.ttfb_ms is None:
                        st.ttfb_ms = (now - t0) * 1000
                    dur = len(item) / 2 / SAMPLE_RATE
                    st.arrivals.append((now, dur))
                    st.audio_s += dur
                    st.synth_s = now - t0
                elif isinstance(item, EngineEvent):
                    if item.type == "first_audio":
                        st.engine_ttfb_ms = item.data.get("ttfb_ms")
                    elif item.type == "error":
                        st.error = f"{item.code}: {item.data.get('message', '')}".splitlines()[0]
    except Exception as e:  # one failed stream is counted; the run goes on
        st.error = f"{type(e).__name__}: {e}".splitlines()[0]
        await stream.cancel()
    st.underruns = count_underruns(st.arrivals)
    return st


def summarize(results: list[StreamStats], concurrency: int, via: str) -> dict[str, Any]:
    ok = [r for r in results if r.error is None and r.ttfb_ms is not None]
    ttfb = [r.ttfb_ms for r in ok if r.ttfb_ms is not None]
    eng = [r.engine_ttfb_ms for r in ok if r.engine_ttfb_ms is not None]
    rtf = [r.synth_s / r.audio_s for r in ok if r.audio_s > 0]
    return {
        "via": via,
        "concurrency": concurrency,
        "streams": len(results),
        "ttfb_ms": percentiles(ttfb, (50, 95, 99), 2),
        "engine_ttfb_ms": percentiles(eng, (50, 99), 2),
        "rtf": round(statistics.median(rtf), 4) if rtf else None,
        "audio_s_per_stream": round(statistics.median([r.audio_s for r in ok]), 2) if ok else None,
        "underruns": sum(r.underruns for r in ok),
        "streams_with_underruns": sum(1 for r in ok if r.underruns),
        "errors": len(results) - len(ok),
        "error_messages": sorted({r.error for r in results if r.error})[:5],
    }


# -- the engine process ---------------------------------------------------------------------------------
class LocalEngine:
    """`python -m plugins.orpheus serve` as a child process (so its CPU time can be read on its own)."""

    def __init__(self, serve_args: list[str], http_port: int = 0) -> None:
        # a private directory (plugins.local_socket): a socket in bare /tmp is refused
        self.address = f"unix://{default_socket_path().parent / f'bench-{os.getpid()}.sock'}"
        cmd = [sys.executable, "-m", "plugins.orpheus", "serve", "--address", self.address, *serve_args]
        if http_port:
            cmd += ["--http-port", str(http_port)]
        self.http_port = http_port
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def wait_ready(self, timeout_s: float = 600.0) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("ready"):
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(
            "the engine server did not start (run `python -m plugins.orpheus serve` to see why)"
        )

    def cpu_seconds(self) -> float:
        """utime + stime of the engine process, all its threads (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


async def read_tokens(http: Any, port: int) -> float:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
        for line in (await r.text()).splitlines():
            if line.startswith("orpheus_audio_tokens_total "):
                return float(line.split()[1])
    raise RuntimeError("engine metrics carry no orpheus_audio_tokens_total")


# -- via engine -------------------------------------------------------------------------------------------
async def bench_engine(args: argparse.Namespace, address: str) -> dict[str, Any]:
    client = EngineClient(address, args.secret)
    await client.connect()
    await one_stream(client, "Warming up.", args.voice)  # first-use costs are not measured
    results: list[StreamStats] = []
    for r in range(args.rounds):
        texts = [REPLIES[(r + i) % len(REPLIES)] for i in range(args.concurrency)]
        results += await asyncio.gather(*(one_stream(client, t, args.voice) for t in texts))
    await client.close()
    return summarize(results, args.concurrency, "engine")


async def bench_overhead(args: argparse.Namespace, engine: LocalEngine) -> dict[str, Any]:
    """All streams running on stand-ins; CPU seconds and audio tokens over a steady window."""
    import aiohttp

    client = EngineClient(engine.address, args.secret)
    await client.connect()
    # made before any stream starts: a session's first SSL context takes ~0.2 s of this loop, which would
    # stall every stream's reading at once and count as an underrun on all of them
    http = aiohttp.ClientSession()
    tasks = []
    for _ in range(args.concurrency):
        tasks.append(asyncio.create_task(one_stream(client, LONG_REPLY, args.voice)))
        await asyncio.sleep(0.085 / max(1, args.concurrency) * 4)  # staggered starts, like real calls
    await asyncio.sleep(2.0)  # let every stream reach steady state
    cpu0, tok0, t0 = engine.cpu_seconds(), await read_tokens(http, engine.http_port), time.perf_counter()
    await asyncio.sleep(args.seconds)
    cpu1, tok1, t1 = engine.cpu_seconds(), await read_tokens(http, engine.http_port), time.perf_counter()
    results = await asyncio.gather(*tasks)
    await http.close()
    await client.close()
    report = summarize(list(results), args.concurrency, "engine (stand-in models)")
    tokens = tok1 - tok0
    report.update(
        {
            "cpu_us_per_token": round((cpu1 - cpu0) / tokens * 1e6, 2) if tokens else None,
            "cpu_core_fraction": round((cpu1 - cpu0) / (t1 - t0), 4),
            "tokens_per_s": round(tokens / (t1 - t0), 1),
            "tokens_per_s_per_stream": round(tokens / (t1 - t0) / args.concurrency, 2),
            "window_s": round(t1 - t0, 2),
            "standin_speed": args.standin_speed,
            "stand_ins": "StandInTokenBackend (82 ids/s/stream × speed) + StandInDecoder (precomputed PCM)",
        }
    )
    return report


# -- via plugin -------------------------------------------------------------------------------------------
async def plugin_reply(tts: Any, text: str, timeout_s: float = STREAM_TIMEOUT_S) -> StreamStats:
    """One reply pushed into the plugin's stream as the agent does; its audio consumed as LiveKit would."""
    from livekit.agents import APIConnectOptions

    res = StreamStats()
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
        res.ttfb_ms = (first_at - sent_at) * 1000
        res.engine_ttfb_ms = orpheus.engine_ttfb_ms
        res.synth_s = time.perf_counter() - sent_at
        res.underruns = count_underruns(res.arrivals)
    except Exception as e:  # one failed reply is counted, the run goes on
        res.error = f"{type(e).__name__}: {e}".splitlines()[0]
    finally:
        await stream.aclose()
    return res


async def plugin_cancel(tts: Any, text: str, timeout_s: float = STREAM_TIMEOUT_S) -> float | None:
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


async def bench_plugin(args: argparse.Namespace, address: str) -> dict[str, Any]:
    """The `--via plugin` keys (DESIGN §6): the engine's plus `plugin_overhead_ms`, `cancel_ms`, leaks."""
    from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS

    orpheus = OrpheusTTS(OrpheusOptions(address=address, secret=args.secret, voice=args.voice))
    voice: Any = orpheus
    if args.chain:
        from plugins.cpu_voice import CpuVoiceTTS
        from plugins.fallback_tts import FallbackTTS

        voice = FallbackTTS(orpheus, CpuVoiceTTS())
    await voice.warm_up()
    await plugin_reply(voice, "Warming up.")  # first-use costs are not the plugin's
    results: list[StreamStats] = []
    for r in range(args.rounds):
        texts = [REPLIES[(r + i) % len(REPLIES)] for i in range(args.concurrency)]
        results += await asyncio.gather(*(plugin_reply(voice, t) for t in texts))
    cancels = [await plugin_cancel(voice, REPLIES[i % len(REPLIES)]) for i in range(args.rounds)]
    cancel_ms = [c for c in cancels if c is not None]
    leaked = voice.active_streams
    await voice.aclose()
    report = summarize(results, args.concurrency, "plugin+fallback-chain" if args.chain else "plugin")
    overhead = [
        x.ttfb_ms - x.engine_ttfb_ms
        for x in results
        if x.error is None and x.ttfb_ms is not None and x.engine_ttfb_ms is not None
    ]
    report.update(
        plugin_overhead_ms={
            **percentiles(overhead, digits=2),
            "max": round(max(overhead), 2) if overhead else None,
        },
        cancel_ms=percentiles(cancel_ms, digits=2),
        leaked_streams=leaked,
    )
    return report


def print_table(r: dict[str, Any]) -> None:
    print(f"TTS via {r['via']}, concurrency {r['concurrency']}, {r['streams']} streams")
    rows: list[tuple[str, Any]] = [
        ("TTFB p50 / p95 / p99 ms", " / ".join(str(r["ttfb_ms"][k]) for k in ("p50", "p95", "p99"))),
        ("engine TTFB p50 / p99 ms", f"{r['engine_ttfb_ms']['p50']} / {r['engine_ttfb_ms']['p99']}"),
        ("RTF (median)", r["rtf"]),
        ("audio per stream s (median)", r["audio_s_per_stream"]),
        ("underruns (streams)", f"{r['underruns']} ({r['streams_with_underruns']})"),
        ("errors", r["errors"]),
    ]
    if "plugin_overhead_ms" in r:
        rows += [
            (
                "plugin overhead p50 / p95 / max ms",
                " / ".join(str(v) for v in r["plugin_overhead_ms"].values()),
            ),
            ("barge-in → engine stopped p50 / p95 ms", f"{r['cancel_ms']['p50']} / {r['cancel_ms']['p95']}"),
            ("streams left open", r["leaked_streams"]),
        ]
    if "cpu_us_per_token" in r:
        rows += [
            ("engine CPU µs per audio token", r["cpu_us_per_token"]),
            ("engine CPU (fraction of a core)", r["cpu_core_fraction"]),
            ("audio tokens/s (per stream)", f"{r['tokens_per_s']} ({r['tokens_per_s_per_stream']})"),
        ]
    for name, value in rows:
        print(f"  {name:<40} {value}")
    for msg in r["error_messages"]:
        print(f"  error: {msg}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tts", description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2, help="streams per concurrent slot, one after another")
    p.add_argument("--via", default="engine", choices=["engine", "plugin"])
    p.add_argument("--chain", action="store_true", help="--via plugin: through the engine → CPU voice chain")
    p.add_argument(
        "--overhead", action="store_true", help="zero-cost stand-in models; report engine CPU per token"
    )
    p.add_argument("--seconds", type=float, default=10.0, help="--overhead: measuring window")
    p.add_argument(
        "--standin-speed",
        type=float,
        default=1.0,
        help="--overhead: the stand-in generates at this multiple of real time",
    )
    p.add_argument("--address", default="", help="a running engine (default: start one on CPU)")
    p.add_argument("--secret", default="")
    p.add_argument("--voice", default="tara")
    p.add_argument(
        "--serve-arg", action="append", default=[], help="extra flag for the started engine (repeat)"
    )
    p.add_argument("--json", default="", help="write the report here")
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.rounds < 1:
        print("error: --concurrency and --rounds must be at least 1", file=sys.stderr)
        return 2
    import logging

    logging.basicConfig(level=logging.WARNING)
    engine: LocalEngine | None = None
    try:
        serve = ["--max-streams", str(max(2, args.concurrency)), *args.serve_arg]
        if args.overhead:
            speed = str(args.standin_speed)
            standin = ["--backend", "standin", "--snac-dir", "standin", "--standin-speed", speed]
            engine = LocalEngine([*standin, *serve], http_port=free_port())
            engine.wait_ready()
            coro: Awaitable[dict[str, Any]] = bench_overhead(args, engine)
        else:
            address = args.address
            if not address:
                engine = LocalEngine(serve)
                engine.wait_ready()
                address = engine.address
            coro = bench_plugin(args, address) if args.via == "plugin" else bench_engine(args, address)
        report: dict[str, Any] = asyncio.run(coro)  # type: ignore[arg-type]
    except (RuntimeError, OSError, ValueError) as e:
        return fail(e, 1)
    finally:
        if engine is not None:
            engine.stop()
    return emit(report, print_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
