"""HTTP tool timing through a real AgentSession: what a tool call adds over the webhook's own time, and how
soon the hold line is heard once a slow tool passes its hold threshold.

    python -m benchmarks.tools [--calls 20] [--json out.json]

The webhook is a real aiohttp server on loopback that notes its own handling time; the TTS is the CPU voice
and the hold line plays from an in-memory phrase cache, as in a call. The LLM is a scripted stand-in that
emits the tool call (the one boundary this machine cannot reach: the embedded 135M model does not call tools).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from livekit.agents.voice import AgentSession

from caches import CachedPhrase, FillerController, FillerControllerOptions, PhraseCache
from plugins.cpu_voice import CpuVoiceTTS
from plugins.cpu_voice.voice import CpuVoice
from simulator.audio_io import Loudspeaker
from simulator.fakes import ScriptedLLM
from worker.agent import AgentOptions, ParleyAgent
from worker.agent_file import HttpToolRuntime, http_tools, parse_agent

HOLD = "Let me check that for you."


async def _server(delay_s: float, handled: list[float]) -> tuple[web.AppRunner, str]:
    async def handler(request: web.Request) -> web.Response:
        t = time.monotonic()
        await request.json()
        await asyncio.sleep(delay_s)
        resp = web.json_response({"answer": 42})
        handled.append((time.monotonic() - t) * 1000)
        return resp

    app = web.Application()
    app.router.add_post("/lookup", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/lookup"


async def one_call(url: str, hold_after_ms: int, cache: PhraseCache, rt: HttpToolRuntime) -> dict[str, float]:
    spec = parse_agent(
        {
            "name": "bench",
            "tools": [
                {"type": "http", "name": "lookup", "description": "Look up.", "url": url, "hold": HOLD}
                | {"hold_after_ms": hold_after_ms}
            ],
        }
    )
    model = ScriptedLLM("Done.", tool="lookup", tool_arguments={"q": "x"})  # an LLM that calls tools
    session: AgentSession = AgentSession(llm=model, tts=CpuVoiceTTS(voice="heart"), user_away_timeout=None)
    speaker = Loudspeaker()
    session.output.audio = speaker
    agent = ParleyAgent(AgentOptions(greeting=""), tools=http_tools(spec.http_tools, rt))
    agent.fillers = FillerController(
        session, cache, opts=FillerControllerOptions(voice="heart", language="en")
    )
    agent.fillers.attach()
    await session.start(agent, record=False)
    try:
        await asyncio.wait_for(session.generate_reply(user_input="Look it up.").wait_for_playout(), 30)
        for _ in range(200):
            if model.answered_at is not None:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
    finally:
        await session.aclose()
    assert model.tool_called_at and model.answered_at is not None, "the tool round trip did not finish"
    out = {"round_trip_ms": (model.answered_at - model.tool_called_at[0]) * 1000}
    t = rt.calls[-1][1]
    if t.hold_at is not None and speaker.starts:
        out["hold_heard_ms"] = (speaker.starts[0] - model.tool_called_at[0]) * 1000
    return out


def _p(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p95": None}
    s = sorted(xs)
    return {"p50": round(statistics.median(s), 1), "p95": round(s[min(len(s) - 1, int(0.95 * len(s)))], 1)}


async def run(calls: int, fast_ms: int, slow_ms: int, hold_after_ms: int) -> dict[str, Any]:
    voice = CpuVoice(voice="heart")
    pcm = voice.synthesize(HOLD)
    pcm.flags.writeable = False
    cache = PhraseCache([CachedPhrase(HOLD, "hold", "heart", "en", "bench", voice.sample_rate, pcm)])
    rt = HttpToolRuntime()
    overhead: list[float] = []
    hold_after_threshold: list[float] = []
    for delay_ms, slow in ((fast_ms, False), (slow_ms, True)):
        handled: list[float] = []
        runner, url = await _server(delay_ms / 1000, handled)
        try:
            for _ in range(calls):
                got = await one_call(url, hold_after_ms if slow else 30_000, cache, rt)
                if slow and "hold_heard_ms" in got:
                    hold_after_threshold.append(got["hold_heard_ms"] - hold_after_ms)
                elif not slow:
                    overhead.append(got["round_trip_ms"] - handled[-1])
        finally:
            await runner.cleanup()
    await rt.aclose()
    return {
        "calls": calls,
        "webhook_ms": fast_ms,
        "tool_overhead_ms": _p(overhead),
        "hold_after_ms": hold_after_ms,
        "slow_webhook_ms": slow_ms,
        "hold_start_after_threshold_ms": _p(hold_after_threshold),
        "hold_lines": len(hold_after_threshold),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tools", description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--webhook-ms", type=int, default=50, help="the fast webhook's own time")
    ap.add_argument("--slow-ms", type=int, default=1500, help="the slow webhook's own time")
    ap.add_argument("--hold-after-ms", type=int, default=250)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    report = asyncio.run(run(args.calls, args.webhook_ms, args.slow_ms, args.hold_after_ms))
    o, h = report["tool_overhead_ms"], report["hold_start_after_threshold_ms"]
    print(f"{'measure':46s} {'p50':>8s} {'p95':>8s}")
    print(f"{'tool round trip over the webhook time (ms)':46s} {o['p50']!s:>8s} {o['p95']!s:>8s}")
    print(f"{'hold line heard after the threshold (ms)':46s} {h['p50']!s:>8s} {h['p95']!s:>8s}")
    print(
        f"({report['calls']} calls each; webhook {args.webhook_ms} ms, slow {args.slow_ms} ms, hold after "
        f"{args.hold_after_ms} ms; {report['hold_lines']} hold lines)"
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
