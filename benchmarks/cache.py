"""Phrase-cache micro-benchmark: cache hit → first 20 ms frame in hand, per output sample rate.

    python -m benchmarks.cache [--dir DIR] [--voice heart] [--language en] [--iterations 2000]
                               [--rates 24000,48000,16000] [--gate-turns 12] [--json PATH]

Without --dir the default phrase set is built with the CPU voice into a temporary directory first.
Each iteration looks up a phrase by a differently-spelled text (normalisation is part of the hit path), opens
its frame iterator and awaits the first frame, inside a running event loop. Target: p99 ≤ 5 ms.
JSON: phrases, load_ms, first_frame_ms {<rate>: {p50, p95, p99, max}}, first_frame_ms_p99 (worst rate),
cold_rate_first_frame_ms (first use of a rate not prepared at load), lookup_us {p50, p99}, target_ms, pass.

With --gate-turns N (default 12, 0 = skip) it also measures what the FillerController's gate costs a reply
that is NOT late: caller turns are committed through the framework's end-of-turn path in a real AgentSession
(zero-cost LLM stand-in, the CPU voice, a real-time loudspeaker), and the time from the reply's first TTS
audio being ready to its first frame at the output is compared with and without the gate. JSON: gate_queued_ms
{with_gate: {p50, p95}, without_gate: {p50, p95}}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from caches import KINDS, BuildOptions, CacheStore, PhraseCache, build_cache, load_phrases, tts_fingerprint

TARGET_P99_MS = 5.0


def stats(values: list[float], digits: int = 3) -> dict[str, float]:
    a = np.asarray(values)
    return {
        "p50": round(float(np.percentile(a, 50)), digits),
        "p95": round(float(np.percentile(a, 95)), digits),
        "p99": round(float(np.percentile(a, 99)), digits),
        "max": round(float(a.max()), digits),
    }


def respell(text: str, rng: random.Random) -> str:
    """The same phrase as an LLM or caller code might spell it."""
    variants = [text, text.lower(), text.upper(), f"  {text}  ", text.rstrip("."), text.replace(" ", "  ")]
    return rng.choice(variants)


async def build_default(root: Path, voice: str, language: str) -> None:
    from plugins.cpu_voice import CpuVoiceTTS

    tts = CpuVoiceTTS(voice=voice)
    phrases = load_phrases().for_voice(voice, language)
    report = await build_cache(
        CacheStore(root), tts, phrases, BuildOptions(voice, language, tts_fingerprint(tts))
    )
    if not report.ok:
        raise SystemExit(f"error: cache build failed for {len(report.failed)} phrases")


async def measure(root: Path, voice: str, language: str, rates: list[int], iterations: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    cache = PhraseCache.load(root, voice=voice, language=language, sample_rates=rates)
    load_ms = (time.perf_counter() - t0) * 1000
    texts = [p.text for kind in KINDS for p in cache.phrases(kind, voice, language)]
    if not texts:
        raise SystemExit(f"error: no cached phrases for {voice}/{language} in {root}")
    rng = random.Random(0)

    lookup_us: list[float] = []
    for _ in range(iterations):
        text = respell(rng.choice(texts), rng)
        t = time.perf_counter()
        hit = cache.lookup(text, voice, language)
        lookup_us.append((time.perf_counter() - t) * 1e6)
        assert hit is not None

    first_frame: dict[str, dict[str, float]] = {}
    for rate in rates:
        samples: list[float] = []
        for _ in range(iterations):
            text = respell(rng.choice(texts), rng)
            t = time.perf_counter()
            hit = cache.lookup(text, voice, language)
            assert hit is not None
            frames = hit.frames(rate)
            frame = await frames.__anext__()
            samples.append((time.perf_counter() - t) * 1000)
            assert frame.sample_rate == rate and frame.samples_per_channel == rate // 50
            await frames.aclose()
            if len(samples) % 50 == 0:
                await asyncio.sleep(0)  # let the loop breathe as it would in a call
        first_frame[str(rate)] = stats(samples)

    # a rate nobody prepared at load: the first hit pays for resampling that clip once
    cold_rate = 44_100 if 44_100 not in rates else 22_050
    cold: list[float] = []
    for text in texts:
        hit = cache.lookup(text, voice, language)
        assert hit is not None
        t = time.perf_counter()
        frames = hit.frames(cold_rate)
        await frames.__anext__()
        cold.append((time.perf_counter() - t) * 1000)
        await frames.aclose()

    worst = max(v["p99"] for v in first_frame.values())
    return {
        "phrases": len(texts),
        "iterations": iterations,
        "load_ms": round(load_ms, 1),
        "first_frame_ms": first_frame,
        "first_frame_ms_p99": worst,
        "cold_rate_first_frame_ms": {"rate": cold_rate, **stats(cold)},
        "lookup_us": {k: v for k, v in stats(lookup_us, 2).items() if k in ("p50", "p99")},
        "hit_rate": round(cache.metrics.hit_rate, 3),
        "target_ms": TARGET_P99_MS,
        "pass": worst <= TARGET_P99_MS,
    }


async def gate_cost(root: Path, voice: str, language: str, turns: int) -> dict[str, dict[str, float]]:
    """Reply ready → reply at the output, with the gate (threshold never reached) and without it."""

    from livekit.agents.voice import AgentSession, SpeechHandle
    from livekit.agents.voice.audio_recognition import _EndOfTurnInfo, _EndOfTurnMetrics

    from caches import FillerController, FillerControllerOptions, FillerOptions, FillerPolicy
    from plugins.cpu_voice import CpuVoiceTTS
    from simulator.audio_io import Loudspeaker
    from simulator.fakes import ScriptedLLM
    from worker.speak import FillerAgent

    cache = PhraseCache.load(root, voice=voice, language=language, sample_rates=[48_000])
    out: dict[str, dict[str, float]] = {}
    for arm, fillers_on in (("without_gate", False), ("with_gate", True)):
        tts = CpuVoiceTTS(voice=voice)
        tts.prewarm()
        session: AgentSession = AgentSession(llm=ScriptedLLM("Sure."), tts=tts, user_away_timeout=None)
        speaker = Loudspeaker(sample_rate=48_000)
        session.output.audio = speaker
        policy = FillerPolicy(FillerOptions(late_threshold_ms=60_000, predict=False))
        opts = FillerControllerOptions(voice=voice, language=language, fillers=fillers_on)
        controller = FillerController(session, cache, policy, opts)
        agent = FillerAgent(instructions="Be brief.", fillers=controller)
        controller.attach()
        await session.start(agent, record=False)
        try:
            for i in range(turns + 1):  # the first turn warms up and is not counted
                replies: list[SpeechHandle] = []

                def on_created(ev: Any, replies: list[SpeechHandle] = replies) -> None:
                    if ev.source == "generate_reply":
                        replies.append(ev.speech_handle)

                session.on("speech_created", on_created)
                now = time.time()
                m = _EndOfTurnMetrics(now - 1.0, now, 0.0, 0.0)
                activity = session._activity
                assert activity is not None
                activity.on_end_of_turn(_EndOfTurnInfo(False, f"Question {i}?", 1.0, m))
                while not replies:
                    await asyncio.sleep(0.005)
                await replies[0].wait_for_playout()
                session.off("speech_created", on_created)
            queued = [t.queued_ms for t in controller.metrics.turns[1:] if t.queued_ms is not None]
            if not queued:
                raise RuntimeError("no reply timings were recorded")
            s = stats(queued, 1)
            out[arm] = {"p50": s["p50"], "p95": s["p95"]}
        finally:
            await session.aclose()
            await speaker.aclose()
    return out


def table(r: dict[str, Any]) -> str:
    lines = [
        f"phrase cache: {r['phrases']} phrases, loaded in {r['load_ms']} ms, {r['iterations']} hits per rate",
        f"{'rate':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}",
    ]
    for rate, s in r["first_frame_ms"].items():
        lines.append(f"{rate:>8} {s['p50']:>8.3f} {s['p95']:>8.3f} {s['p99']:>8.3f} {s['max']:>8.3f}")
    c = r["cold_rate_first_frame_ms"]
    lines.append(
        f"{c['rate']:>8} {c['p50']:>8.3f} {c['p95']:>8.3f} {c['p99']:>8.3f} {c['max']:>8.3f}  (not prepared)"
    )
    lines.append(f"lookup alone: p50 {r['lookup_us']['p50']} µs, p99 {r['lookup_us']['p99']} µs")
    if "gate_queued_ms" in r:
        g = r["gate_queued_ms"]
        lines.append(
            f"reply ready → at output (not late): without gate p50 {g['without_gate']['p50']} / p95 "
            f"{g['without_gate']['p95']} ms; "
            f"with gate p50 {g['with_gate']['p50']} / p95 {g['with_gate']['p95']} ms"
        )
    verdict = "PASS" if r["pass"] else "FAIL"
    lines.append(
        f"cache hit → first frame p99 {r['first_frame_ms_p99']} ms (target ≤ {r['target_ms']} ms): {verdict}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cache", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dir", type=Path, help="an existing phrase-cache directory (default: build a temporary one)"
    )
    ap.add_argument("--voice", default="heart")
    ap.add_argument("--language", default="en")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--rates", default="24000,48000,16000", help="comma-separated output sample rates")
    ap.add_argument("--gate-turns", type=int, default=12, help="turns per arm for the gate cost (0 = skip)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    try:
        rates = [int(x) for x in args.rates.split(",") if x.strip()]
    except ValueError:
        print(f"error: --rates must be comma-separated integers (got {args.rates!r})", file=sys.stderr)
        return 2
    if args.iterations < 1 or not rates:
        print("error: need at least one iteration and one rate", file=sys.stderr)
        return 2

    async def run_in(root: Path) -> dict[str, Any]:
        result = await measure(root, args.voice, args.language, rates, args.iterations)
        if args.gate_turns > 0:
            result["gate_queued_ms"] = await gate_cost(root, args.voice, args.language, args.gate_turns)
        return result

    async def run() -> dict[str, Any]:
        if args.dir is not None:
            return await run_in(args.dir)
        with tempfile.TemporaryDirectory(prefix="parley-cache-bench-") as tmp:
            await build_default(Path(tmp), args.voice, args.language)
            return await run_in(Path(tmp))

    try:
        result = asyncio.run(run())
    except Exception as e:  # a bad directory or voice: one line, no traceback
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
