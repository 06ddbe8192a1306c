"""Voice-to-voice latency of a scripted call: Parley's pipeline vs the stock LiveKit Agents wiring.

    python -m benchmarks.call --data ../shared/audio/conversation --pipeline parley|stock|both \
        [--json out.json] [--out DIR] [--livekit [auto]]

Each turn (a 16 kHz WAV, in name order) is played into a real AgentSession as 20 ms real-time frames after the
agent's previous reply; v2v is measured at the devices (DESIGN §6). Both pipelines share one LLM server
and run in the same process, one after the other, so their ratio is measured in one run.
With --livekit the parley call goes through a real local room instead (benchmarks/livekit_call.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from livekit import rtc
from livekit.agents.voice import Agent, AgentSession

from worker.settings import Settings, SettingsError, load_settings

from .harness import CallResult, run_call, write_stereo
from .report import call_json, conversation_text, latency_table, timeline_png

log = logging.getLogger("parley.bench.call")


async def _warm_stt(stt_model: Any, sample: Path) -> None:
    """One decode before the call so neither pipeline pays the cold first decode inside a turn."""
    from .harness import load_turn

    pcm = load_turn(sample)[: 16000 * 2]
    frame = rtc.AudioFrame(pcm.tobytes(), 16000, 1, len(pcm))
    try:
        await stt_model.recognize(frame)
    except Exception as e:  # warm-up is best effort
        log.debug("stt warm-up failed: %s", e)


def build_parley(settings: Settings, llm_url: str) -> tuple[AgentSession, Agent, Any]:
    from worker.pipeline import build_call, load_components

    comp = load_components(settings, llm_url)
    session, agent = build_call(settings, comp)
    return session, agent, comp


def build_stock(settings: Settings, llm_url: str) -> tuple[AgentSession, Agent, Any]:
    from livekit.agents import stt
    from livekit.plugins import silero

    from worker.agent import GREETING, INSTRUCTIONS
    from worker.pipeline import load_llm

    from .stock import PlainHibariTTS, PlainWhisperSTT

    vad = silero.VAD.load()
    stt_model = stt.StreamAdapter(stt=PlainWhisperSTT(), vad=vad)
    session: AgentSession = AgentSession(
        vad=vad,
        stt=stt_model,
        llm=load_llm(settings, llm_url),
        tts=PlainHibariTTS(),
        # defaults everywhere, but pinned to local VAD so nothing goes to LiveKit Cloud (DESIGN §3)
        turn_handling={"turn_detection": "vad", "interruption": {"mode": "vad"}},
        user_away_timeout=None,
    )

    class StockAgent(Agent):
        async def on_enter(self) -> None:
            self.session.say(GREETING["en"])

    return session, StockAgent(instructions=INSTRUCTIONS["en"]), stt_model


async def run_one(name: str, settings: Settings, llm_url: str, turns: list[Path]) -> CallResult:
    builder = build_parley if name == "parley" else build_stock
    session, agent, comp = builder(settings, llm_url)
    stt_model = comp.stt if hasattr(comp, "stt") else comp
    await _warm_stt(stt_model, turns[0])
    return await run_call(name, session, agent, turns)


def _write_outputs(res: CallResult, out: Path) -> dict[str, str]:
    wav = out / f"call-{res.pipeline}.wav"
    png = out / f"timeline-{res.pipeline}.png"
    write_stereo(res, wav)
    timeline_png(res, png)
    return {"wav": str(wav), "timeline": str(png)}


def _report(res: CallResult, out: Path, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    j = call_json(res)
    j["files"] = _write_outputs(res, out)
    print(conversation_text(res, show_text=args.demo or args.show_text))
    print(latency_table(res))
    print(f"({res.pipeline} call took {seconds:.1f} s; audio and timeline in {out})\n")
    return j


def _room_call(args: argparse.Namespace, turns: list[Path], out: Path) -> dict[str, Any] | None:
    """The parley call through a real local room; None (after one line saying why) when there is none."""
    from .livekit_call import LiveKitCallOptions, try_room_call

    t = time.monotonic()
    parley_env = {k: v for k, v in os.environ.items() if k.startswith("PARLEY_")}
    res, why = try_room_call(turns, LiveKitCallOptions(out_dir=out / "stack", base_env=parley_env))
    if res is None:
        if args.livekit == "on":
            print(f"error: no local LiveKit room: {why} (logs in {out / 'stack'})", file=sys.stderr)
        else:
            print(f"no local LiveKit room ({why}); running the call offline instead", flush=True)
        return None
    print(f"== through a real local LiveKit room (livekit-server + worker; logs in {out / 'stack'}) ==")
    return {**_report(res, out, args, time.monotonic() - t), "transport": "livekit-room"}


def _turns(args: argparse.Namespace) -> list[Path]:
    turns = sorted(Path(args.data).glob("*.wav"))
    if not turns:
        raise SystemExit(f"error: no *.wav turns in {args.data}")
    return turns


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Through a real room (--livekit; in this thread, so Ctrl-C tears the stack down), else offline."""
    if args.livekit:
        load_settings()  # a bad setting is one line here, not a worker that never registers
        report = _room_call(args, _turns(args), Path(args.out))
        if report is not None:
            _write_json(args, report)
            return report
        if args.livekit == "on":
            raise SystemExit(1)
    return asyncio.run(main_async(args))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings()
    turns = _turns(args)
    names = ["parley", "stock"] if args.pipeline == "both" else [args.pipeline]
    out = Path(args.out)
    llm_server = None
    llm_url = settings.llm_base_url
    if not llm_url:
        from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions
        from worker.pipeline import conversation_prefix

        llm_server = EmbeddedLLM(
            EmbeddedLLMOptions(threads=settings.llm_embedded_threads, log_path=settings.llm_embedded_log)
        )
        llm_url = await asyncio.to_thread(llm_server.start)
        await asyncio.to_thread(llm_server.warm, conversation_prefix(settings))
    results: dict[str, Any] = {}
    try:
        for name in names:
            t = time.monotonic()
            res = await run_one(name, settings, llm_url, turns)
            results[name] = _report(res, out, args, time.monotonic() - t)
    finally:
        if llm_server:
            llm_server.close()
    if len(names) == 1:
        report = results[names[0]]
    else:
        p = results["parley"]["v2v_ms"]["p50"]
        s = results["stock"]["v2v_ms"]["p50"]
        report = {**results, "ratio_v2v_p50": round(p / s, 3) if p and s else None}
        print(f"v2v p50: parley {p} ms vs stock {s} ms → ratio {report['ratio_v2v_p50']}")
    _write_json(args, report)
    return report


def _write_json(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.call", description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder of caller turns (*.wav, 16 kHz mono)")
    ap.add_argument("--pipeline", choices=["parley", "stock", "both"], default="parley")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--out", default="out/call", help="folder for the stereo WAV and timeline PNG")
    ap.add_argument("--demo", action="store_true", help="print the conversation text (make demo)")
    ap.add_argument("--show-text", action="store_true", help="print transcripts and replies")
    ap.add_argument(
        "--livekit",
        nargs="?",
        const="on",
        choices=["on", "auto"],
        help="call through a real local LiveKit room (livekit-server + the worker; a sealed network "
        "namespace when root, else loopback); --pipeline parley only. 'auto': the room when "
        "bin/livekit-server works, else offline (make demo)",
    )
    ap.add_argument("--log-level", default="WARNING")
    args = ap.parse_args(argv)
    if args.livekit and args.pipeline != "parley":
        ap.exit(2, "error: --livekit runs the parley pipeline only (run stock and both offline)\n")
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        report = run(args)
    except SettingsError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    errors = list(report.get("errors", []))
    for r in report.values():
        if isinstance(r, dict):
            errors += r.get("errors", [])
    if errors:
        print(f"errors: {errors}", file=sys.stderr)


if __name__ == "__main__":
    main()
