"""Voice-to-voice latency of scripted calls: Parley's pipeline vs the stock LiveKit Agents wirings.

    python -m benchmarks.call --data "$(python -m simulator.test_speech)/conversation" [--data DIR2 ...] \
        --pipeline parley,stock-tuned,stock [--runs N] [--livekit [auto]] [--json out.json] [--out DIR] \
        [--agent FILE] [--script FILE]

Each call is a folder of turns (call_plan.py: *.wav in name order, or turns.json with barge-ins). With
--livekit every pipeline is served by the real worker process (`python worker.py start`, one job process per
call, `--set pipeline=…` for the wiring) behind one local livekit-server, and the scripted caller measures
at the track it receives; without it the calls run offline through an AgentSession with scripted devices.
Runs are interleaved: each round calls every pipeline with every call, the pipeline order rotated. v2v is the
caller's last voiced sample → the first voiced audio of the agent's answer (found by the speech that made
it, worker/turn_marks.py), DESIGN §6.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Literal

from livekit import rtc
from livekit.agents.voice import Agent, AgentSession

from simulator.call_plan import PlanError, TurnPlan, load_plan, rotated
from simulator.offline import CallResult, run_call, write_stereo
from worker.settings import Settings, SettingsError, load_settings

from . import machine_speed
from .cli import write_json
from .heard import add_listen_arguments, describe, listen_runs
from .report import (
    call_json,
    conversation_text,
    latency_table,
    pipelines_json,
    pipelines_table,
    timeline_png,
)

log = logging.getLogger("parley.bench.call")

PIPELINES = ("parley", "stock-tuned", "stock")
RunRecord = tuple[str, str, int, CallResult]  # (pipeline, call, round, result)


def parse_pipelines(text: str) -> list[str]:
    """'parley,stock-tuned,stock' (any subset, in that order of mention)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in PIPELINES]
    if bad or not names:
        raise ValueError(f"unknown pipeline {bad[0] if bad else text!r}; choose from {', '.join(PIPELINES)}")
    return list(dict.fromkeys(names))


# --- offline ---------------------------------------------------------------------------------------------


async def warm_stt(stt_model: Any, sample: Path) -> None:
    """One decode before the call so no pipeline pays the cold first decode inside a turn."""
    from simulator.offline import load_turn

    pcm = load_turn(sample)[: 16000 * 2]
    frame = rtc.AudioFrame(pcm.tobytes(), 16000, 1, len(pcm))
    try:
        await stt_model.recognize(frame)
    except Exception as e:  # warm-up is best effort
        log.debug("stt warm-up failed: %s", e)


class OfflineBuilder:
    """Loads each pipeline's models once (as a job process would) and builds a fresh session per call."""

    def __init__(self, settings: Settings, llm_url: str) -> None:
        self.settings = settings
        self.llm_url = llm_url
        self._comp: dict[str, Any] = {}

    def build(self, name: str) -> tuple[AgentSession, Agent, Any]:
        if name == "parley":
            from worker.pipeline import build_call, load_components

            comp = self._comp.get(name) or load_components(self.settings, self.llm_url)
            self._comp[name] = comp
            session, agent = build_call(self.settings, comp)
            return session, agent, comp.stt
        from worker.stock_pipeline import build_stock_call, load_stock_components, stock_options

        scomp = self._comp.get(name) or load_stock_components(
            self.settings, self.llm_url, stock_options(name)
        )
        self._comp[name] = scomp
        ssession, sagent = build_stock_call(self.settings, scomp)
        return ssession, sagent, None


def build_parley(settings: Settings, llm_url: str) -> tuple[AgentSession, Agent, Any]:
    """One Parley session with its own freshly loaded components (tests that need a whole pipeline)."""
    from worker.pipeline import build_call, load_components

    comp = load_components(settings, llm_url)
    session, agent = build_call(settings, comp)
    return session, agent, comp


async def run_one(
    name: str, settings: Settings, llm_url: str, turns: list[Path] | list[TurnPlan]
) -> CallResult:
    """One offline call of one pipeline (models loaded for it alone)."""
    session, agent, stt_model = OfflineBuilder(settings, llm_url).build(name)
    first = turns[0] if isinstance(turns[0], Path) else turns[0].path
    if stt_model is not None:
        await warm_stt(stt_model, first)
    return await run_call(name, session, agent, turns)


async def run_offline(
    calls: dict[str, list[TurnPlan]],
    pipelines: list[str],
    runs: int,
    on_run: Any = None,
) -> list[RunRecord]:
    settings = load_settings()
    llm_server = None
    llm_url = settings.llm_base_url
    if not llm_url:
        from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions
        from worker.pipeline import conversation_prefix

        llm_server = EmbeddedLLM(
            EmbeddedLLMOptions(
                threads=settings.llm_embedded_threads,
                n_parallel=settings.max_calls + 1,  # the calls' slots and the end-of-turn scorer's
                log_path=settings.llm_embedded_log,
            )
        )
        llm_url = await asyncio.to_thread(llm_server.start)
        await asyncio.to_thread(llm_server.warm, conversation_prefix(settings))
    builder = OfflineBuilder(settings, llm_url)
    out: list[RunRecord] = []
    try:
        for r in range(runs):
            for name in rotated(pipelines, r):
                for call, plan in calls.items():
                    session, agent, stt_model = builder.build(name)
                    if stt_model is not None:
                        await warm_stt(stt_model, plan[0].path)
                    res = await run_call(name, session, agent, plan)
                    out.append((name, call, r, res))
                    if on_run:
                        on_run(out[-1])
    finally:
        if llm_server:
            llm_server.close()
    return out


# --- through the room ------------------------------------------------------------------------------------


def room_reason() -> str | None:
    from simulator.room_runner import room_unavailable_reason

    return room_unavailable_reason()


def use_room(livekit: str | None) -> bool:
    """--livekit on: the room or a one-line error; auto: the room when it works, else offline (one line)."""
    if not livekit:
        return False
    why = room_reason()
    if why is None:
        return True
    if livekit == "on":
        raise SystemExit(f"error: no local LiveKit room: {why}")
    print(f"no local LiveKit room ({why}); running the call offline instead", flush=True)
    return False


def run_room(
    calls: dict[str, list[TurnPlan]],
    pipelines: list[str],
    runs: int,
    out: Path,
    on_run: Any = None,
    isolation: Literal["auto", "netns", "loopback"] = "auto",
    reply_timeout_s: float = 30.0,
) -> list[RunRecord]:
    from simulator.room_runner import LiveKitCallOptions, RoomRun, run_room_benchmark

    parley_env = {k: v for k, v in os.environ.items() if k.startswith("PARLEY_")}
    opts = LiveKitCallOptions(
        out_dir=out / "stack", base_env=parley_env, isolation=isolation, reply_timeout_s=reply_timeout_s
    )

    def each(run: RoomRun) -> None:
        if on_run:
            on_run((run.pipeline, run.call, run.round, run.result))

    done = run_room_benchmark(calls, pipelines, runs, opts, on_run=each)
    return [(r.pipeline, r.call, r.round, r.result) for r in done]


# --- reporting -------------------------------------------------------------------------------------------


def _write_call_files(res: CallResult, folder: Path) -> dict[str, str]:
    wav = folder / f"call-{res.pipeline}.wav"
    png = folder / f"timeline-{res.pipeline}.png"
    write_stereo(res, wav)
    return {"wav": str(wav), **({"timeline": str(png)} if timeline_png(res, png) else {})}


def _printer(args: argparse.Namespace, out: Path, single: bool) -> Any:
    def on_run(rec: RunRecord) -> None:
        name, call, r, res = rec
        if single or args.demo:
            print(conversation_text(res, show_text=args.demo))
            print(latency_table(res))
        j = call_json(res)
        if r == 0:  # audio and a timeline of the first round; later ones only in the JSON
            _write_call_files(res, out / f"round{r}" / f"{name}-{call}")
        print(
            f"round {r} {name:<11} {call}: v2v p50 {j['v2v_ms']['p50']} ms, p95 {j['v2v_ms']['p95']} ms, "
            f"errors {len(j['errors'])}",
            flush=True,
        )

    return on_run


def _check_script(call_name: str, data_dir: Path, runs: list[RunRecord]) -> list[dict[str, Any]]:
    """Which of the script's expectations held, per run of the scripted call."""
    from simulator.call_script import check_expectations  # type: ignore[import-not-found,unused-ignore]

    results: list[dict[str, Any]] = []
    for name, call, r, res in runs:
        if call != call_name:
            continue
        checks = check_expectations(data_dir / "turns.json", [t.reply_text for t in res.turns])
        held = sum(1 for c in checks if c.get("held", c.get("ok")))
        print(f"script expectations, round {r} {name}: {held}/{len(checks)} held")
        for c in checks:
            if not c.get("held", c.get("ok")):
                print(f"  not held: {json.dumps(c, ensure_ascii=False)[:200]}")
        results.append({"pipeline": name, "round": r, "checks": checks})
    return results


def load_calls(args: argparse.Namespace, out: Path) -> dict[str, list[TurnPlan]]:
    dirs = [Path(d) for d in args.data or []]
    if args.script:
        from simulator.call_script import render_script  # type: ignore[import-not-found,unused-ignore]

        agent = Path(args.agent) if args.agent else None
        args.script_dir = Path(render_script(Path(args.script), out / "caller", agent_file=agent))
        dirs.append(args.script_dir)
    if not dirs:
        raise PlanError("give --data DIR (repeatable) or --script FILE")
    calls: dict[str, list[TurnPlan]] = {}
    for d in dirs:
        name = d.name or str(d)
        while name in calls:
            name += "+"
        calls[name] = load_plan(d)
    return calls


def mark_backchannels(runs: list[RunRecord], calls: dict[str, list[TurnPlan]]) -> None:
    """Each turn the call plan marks as a backchannel, by its file (a call cut short has fewer turns)."""
    for _, call, _, res in runs:
        marked = {t.path.name for t in calls.get(call, []) if t.backchannel}
        for tr in res.turns:
            tr.backchannel = Path(tr.file).name in marked


def _print_heard(report: dict[str, Any]) -> None:
    for name, r in report["pipelines"].items():
        print(f"{name}: {describe(r['replies_heard'])}{_backchannel_line(r['turn_taking'])}")


def _backchannel_line(turn_taking: dict[str, Any]) -> str:
    b = turn_taking.get("backchannels")
    if not b:
        return ""
    return (
        f"; backchannels: {b['said']} said, {b['stopped_the_agent']} stopped the agent, "
        f"{b['answered']} answered"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    pipelines = parse_pipelines(args.pipeline)
    out = Path(args.out)
    if args.agent:
        os.environ["PARLEY_AGENT"] = str(Path(args.agent).resolve())
    load_settings()  # a bad setting is one line here, not a worker that never registers
    if args.agent:
        from worker.agent_file.runtime import served_agent_for

        served = served_agent_for(os.environ["PARLEY_AGENT"])
        print(f"== agent: {served.name if served and served.name else args.agent} ({args.agent}) ==")
    calls = load_calls(args, out)
    single = len(pipelines) == 1 and args.runs == 1 and len(calls) == 1
    on_run = _printer(args, out, single)
    t = time.monotonic()
    livekit = use_room(args.livekit)
    speed = None
    if livekit and not args.demo:
        # before the calls, on the same machine: room figures move with the machine as much as with the code
        speed = machine_speed.measure()
        print(machine_speed.describe(speed), flush=True)
    if livekit:
        print(f"== through a real local LiveKit room (livekit-server + worker; logs in {out / 'stack'}) ==")
        runs = run_room(calls, pipelines, args.runs, out, on_run, args.isolation, args.reply_timeout_s)
    else:
        runs = asyncio.run(run_offline(calls, pipelines, args.runs, on_run))
    print(f"({len(runs)} calls took {time.monotonic() - t:.0f} s; audio and timelines in {out})")
    mark_backchannels(runs, calls)
    if args.listen:
        listen_runs([r[3] for r in runs], args.listen)  # after the calls: no CPU taken from them
    if single:
        name, call, _, res = runs[0]
        report = call_json(res)
        folder = out / "round0" / f"{name}-{call}"
        report["files"] = {
            "wav": str(folder / f"call-{name}.wav"),
            "timeline": str(folder / f"timeline-{name}.png"),
        }
        report["livekit"] = livekit
        print(describe(report["replies_heard"]) + _backchannel_line(report["turn_taking"]))
        if livekit:
            report["transport"] = "livekit-room"
    else:
        report = pipelines_json(runs, pipelines, args.runs, livekit)
        print(pipelines_table(report))
        _print_heard(report)
    if args.script:
        report["script"] = _check_script(list(calls)[-1], args.script_dir, runs)
    if speed is not None:
        report["machine_speed"] = speed
    if args.json:
        write_json(args.json, report)
    return report


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.call", description=__doc__.split("\n")[0])
    ap.add_argument("--data", action="append", help="a call: folder of turns (*.wav 16 kHz, or turns.json)")
    ap.add_argument("--pipeline", default="parley", help="parley,stock-tuned,stock (any subset)")
    ap.add_argument("--runs", type=int, default=1, help="rounds; each calls every pipeline, order rotated")
    ap.add_argument("--agent", help="an agent file (sets PARLEY_AGENT for the worker / offline session)")
    ap.add_argument("--script", help="a call script: rendered into OUT/caller/ and played as one more call")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--out", default="out/call", help="folder for audio and timelines")
    ap.add_argument("--demo", action="store_true", help="print the conversation text (make demo)")
    ap.add_argument(
        "--livekit",
        nargs="?",
        const="on",
        choices=["on", "auto"],
        help="call through a real local LiveKit room (livekit-server + one worker process per pipeline; a "
        "sealed network namespace when root, else loopback). 'auto': the room when bin/livekit-server "
        "works, else offline (make demo)",
    )
    ap.add_argument(
        "--isolation",
        choices=["auto", "netns", "loopback"],
        default="auto",
        help="the room's network: a sealed namespace (root), plain loopback (any user), or auto (netns "
        "when allowed)",
    )
    ap.add_argument(
        "--reply-timeout-s",
        type=float,
        default=30.0,
        help="room: how long the caller waits for a reply before its next line (a loaded host's replies "
        "come late; a caller that moves on merges two turns)",
    )
    add_listen_arguments(ap, "after the calls")
    ap.add_argument("--log-level", default="WARNING")
    args = ap.parse_args(argv)
    try:
        parse_pipelines(args.pipeline)
    except ValueError as e:
        ap.exit(2, f"error: {e}\n")
    if args.runs < 1:
        ap.exit(2, "error: --runs must be at least 1\n")
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout` / a CI cancel tears the room stack down too
    try:
        report = run(args)
    except SettingsError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    errors = list(report.get("errors", []))
    for r in report.get("pipelines", {}).values():
        errors += r.get("errors", [])
    if errors:
        print(f"errors: {errors}", file=sys.stderr)


if __name__ == "__main__":
    main()
