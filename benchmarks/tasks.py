"""Task benchmark: does the agent get the caller's job done? Call scripts with an expected outcome (the
booking service's bookings afterwards, or facts a reply must say) run against the example booking service.

    python -m benchmarks.tasks [--split dev|test|all|unseen] [--agent FILE] [--llm URL] [--json OUT]
    python -m benchmarks.tasks --audio [--livekit]   # each task through benchmarks.call (voice, STT, TTS)

Text mode (default): each caller line goes through a real AgentSession (`session.run`), the agent the
worker would serve (a flow agent, or a free-talk agent on the embedded LLM). Audio mode renders the lines
with the task's caller voice and plays them through `benchmarks.call` (offline, or the real room with
--livekit). Reported: tasks right, turns to success, wrong bookings (a booking, move or cancellation the
task did not ask for), apology lines, and with audio the v2v latency of the calls.

A task file (simulator/tasks/{dev,test}/*.yaml):
    description: ...
    voice: heart                  # the caller's voice in audio mode
    before: [{name: Jordan Lee, dentist: Dr. Patel, slot: wednesday 10:00}]   # bookings already made
    turns: ["Hi, I'd like a cleaning ...", ...]    # or {say:, expect:} as in call scripts
    outcome:
      bookings: [{name: Alex Kim, dentist: Dr. Morgan, weekday: tuesday, hour: 9, service: cleaning}]
      said: [nine, five]          # words some reply must contain
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import yaml
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "simulator" / "tasks"
TEXT_TURN_S = 90.0  # text mode: one LLM request's limit (a turn may make two: a tool call, then the reply)
REPLY_TIMEOUT_S = 90.0
"""A task's caller waits this long for each reply: on a loaded host the voice detector alone has fallen 15 s
behind (2026-12-07), and a caller that moves on early says "yes" to a question it never heard."""
APOLOGY = re.compile(r"\b(sorry|apolog|trouble thinking|say that again|for your loss)\b", re.IGNORECASE)


@dataclass
class TaskResult:
    task: str
    right: bool
    turns: int  # caller turns until the outcome held (0 = never)
    wrong_bookings: int
    apologies: int
    replies: list[str] = field(default_factory=list)
    v2v_ms: list[float] = field(default_factory=list)
    problem: str = ""
    extracted: list[str] = field(default_factory=list)  # slots the LLM read (text mode, --llm): "day=…"


def load_task(path: Path) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    unknown = set(raw) - {"description", "voice", "before", "turns", "outcome"}
    if unknown or not raw.get("turns") or not isinstance(raw.get("outcome"), dict):
        raise ValueError(f"task {path}: needs turns and outcome (unknown: {sorted(unknown)})")
    return dict(raw)


def _lines(task: dict[str, Any]) -> list[str]:
    return [re.sub(r"\[pause [\d.]+\]\s*", "", t if isinstance(t, str) else t["say"]) for t in task["turns"]]


# --- judging --------------------------------------------------------------------------------------------


def _key(b: dict[str, Any]) -> tuple[str, str, int, int, str]:
    when = dt.datetime.fromisoformat(b["slot"])
    return (b["name"].lower(), b["dentist"], when.weekday(), when.hour, b.get("service", ""))


def _wanted(e: dict[str, Any]) -> tuple[str, str, int, int, str]:
    from examples.booking_service import WEEKDAYS

    return (
        e["name"].lower(),
        e["dentist"],
        WEEKDAYS.index(e["weekday"]),
        int(e["hour"]),
        e.get("service", ""),
    )


def booking_matches(
    state: list[dict[str, Any]], outcome: dict[str, Any], start: list[dict[str, Any]]
) -> tuple[bool, int]:
    """(the bookings are exactly the expected ones, how many changes were wrong: a booking made or moved that
    the task did not ask for, or one there at the start that should have stayed and is gone). A service
    left out of the expectation matches any; a booking the agent failed to cancel is a failed task, not a
    wrong booking."""
    have = [_key(b) for b in state]
    before = [_key(b) for b in start]
    unmatched = list(have)
    missing = []
    for w in (_wanted(e) for e in outcome.get("bookings", [])):
        hit = next((h for h in unmatched if h[:4] == w[:4] and (not w[4] or h[4] == w[4])), None)
        if hit is None:
            missing.append(w)
        else:
            unmatched.remove(hit)
    made = [h for h in unmatched if h not in before]
    lost = [w for w in missing if any(b[:4] == w[:4] for b in before)]
    return not missing and not unmatched, len(made) + len(lost)


def _said(replies: list[str], outcome: dict[str, Any]) -> bool:
    text = " ".join(replies).lower()
    return all(w.lower() in text for w in outcome.get("said", []))


# --- the booking service --------------------------------------------------------------------------------


def _seed(calendar: Any, task: dict[str, Any]) -> None:
    """The bookings a task starts with; a slot is "wednesday 10:00" (the next Wednesday after today)."""
    from examples.booking_service import WEEKDAYS

    for b in task.get("before", []):
        weekday, hhmm = str(b["slot"]).split()
        ahead = (WEEKDAYS.index(weekday) - calendar.start.weekday()) % 7 or 7
        day = calendar.start + dt.timedelta(days=ahead)
        calendar.book(b["name"], b["dentist"], f"{day.isoformat()} {hhmm}", b.get("service", "checkup"))


async def _serve(calendar: Any, port: int) -> web.AppRunner:
    from examples.booking_service import make_app

    runner = web.AppRunner(make_app(calendar))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


# --- text mode --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlmTarget:
    """The OpenAI-compatible LLM the agent gets: the embedded one, or an external one (`--llm`)."""

    url: str
    model: str
    external: bool


def _agent(
    agent_file: Path, base_url: str, target: LlmTarget | None, runtime: Any, reads: list[str]
) -> tuple[Any, Any]:
    """(agent, llm) as the worker serves the file: its flow (reading slots its parsers missed through an
    external LLM, as the worker does), or free talk on the LLM with its HTTP tools."""
    from livekit.plugins import openai

    from simulator.fakes import ScriptedLLM
    from worker.agent import AgentOptions, ParleyAgent
    from worker.agent_file import http_tools, parse_agent
    from worker.flows.agent import make_flow_agent
    from worker.flows.clock import with_date

    raw = yaml.safe_load(agent_file.read_text(encoding="utf-8"))
    raw.setdefault("variables", {})["booking"] = base_url
    spec = parse_agent(raw, agent_file)
    opts = AgentOptions(
        instructions=with_date(spec.instructions or AgentOptions().spoken_instructions, spec.timezone),
        greeting="",
        max_sentences=spec.llm.max_sentences or 2,
    )
    tools = http_tools(spec.http_tools, runtime)
    if spec.flow is not None:  # the session needs an LLM object; a flow agent never calls it
        agent = make_flow_agent(spec.flow, spec.timezone, spec.http_tools, runtime, opts, tools)
        if target is not None and target.external and agent.flow is not None:
            import openai as openai_sdk

            from worker.flows.extract import llm_extractor

            client = openai_sdk.AsyncClient(base_url=target.url, api_key="none", max_retries=0)
            extract = llm_extractor(client, target.model, spec.timezone)

            async def counted(text: str, name: str, slot: Any) -> str | None:
                value = await extract(text, name, slot)
                reads.append(f"{name}={value}")
                return value

            agent.flow.extract = counted
        return agent, ScriptedLLM(fail=True)
    assert target, "a free-talk agent needs an LLM"
    # text mode measures whether the job gets done, not how fast: a larger model on a loaded CPU may take
    # tens of seconds to read the instructions and tool schemas
    model = openai.LLM(
        base_url=target.url,
        api_key="none",
        model=target.model,
        temperature=spec.llm.temperature or 0.3,
        timeout=httpx.Timeout(TEXT_TURN_S, connect=2.0),
        max_retries=0,
    )
    return ParleyAgent(opts, tools=tools), model


async def run_text(
    task: dict[str, Any], name: str, agent_file: Path, port: int, target: LlmTarget | None
) -> TaskResult:
    from livekit.agents import AgentSession, APIConnectOptions
    from livekit.agents.voice.agent_session import SessionConnectOptions

    from examples.booking_service import Calendar, state_of
    from worker.agent_file import HttpToolRuntime

    calendar = Calendar(start=dt.date.today())
    _seed(calendar, task)
    start = state_of(calendar)["bookings"]
    runner = await _serve(calendar, port)
    runtime = HttpToolRuntime()
    res = TaskResult(name, False, 0, 0, 0)
    try:
        agent, model = _agent(agent_file, f"http://127.0.0.1:{port}", target, runtime, res.extracted)
        conn = SessionConnectOptions(llm_conn_options=APIConnectOptions(max_retry=0, timeout=TEXT_TURN_S))
        async with AgentSession(llm=model, conn_options=conn) as session:
            await session.start(agent)
            for i, line in enumerate(_lines(task), 1):
                result: Any = await asyncio.wait_for(session.run(user_input=line), TEXT_TURN_S * 2)
                res.replies += [
                    e.item.text_content or ""
                    for e in result.events
                    if e.type == "message" and e.item.role == "assistant"
                ]
                ok, _ = booking_matches(state_of(calendar)["bookings"], task["outcome"], start)
                if ok and _said(res.replies, task["outcome"]) and not res.turns:
                    res.turns = i
    except Exception as e:  # a broken task is a failed task, reported, not a crashed benchmark
        res.problem = f"{type(e).__name__}: {e}"[:200]
    finally:
        await runtime.aclose()
        await runner.cleanup()
    ok, res.wrong_bookings = booking_matches(state_of(calendar)["bookings"], task["outcome"], start)
    res.right = ok and _said(res.replies, task["outcome"]) and not res.problem
    res.apologies = sum(1 for r in res.replies if APOLOGY.search(r) and not _tool_refusal(r))
    return res


def _tool_refusal(line: str) -> bool:
    """A tool's failure line ("Sorry, I can't reach our calendar") reports a fact, not an apology loop."""
    return bool(re.search(r"can't reach|couldn't (save|move|cancel)", line))


# --- audio mode -------------------------------------------------------------------------------------------


async def run_audio(
    task: dict[str, Any],
    name: str,
    agent_file: Path,
    port: int,
    livekit: bool,
    out: Path,
    target: LlmTarget | None = None,
) -> TaskResult:
    """The task as a call script through benchmarks.call (voice, STT, turn-taking, TTS); an external LLM
    reaches the worker as a deployment would set it (PARLEY_LLM_BASE_URL, PARLEY_LLM_MODEL)."""
    from examples.booking_service import Calendar, state_of

    calendar = Calendar(start=dt.date.today())
    _seed(calendar, task)
    start = state_of(calendar)["bookings"]
    runner = await _serve(calendar, port)
    res = TaskResult(name, False, 0, 0, 0)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / f"{name}.yaml"
        keep = {k: task[k] for k in ("voice", "turns", "description") if k in task}
        script.write_text(yaml.safe_dump(keep, sort_keys=False))
        report = out / f"{name}.json"
        cmd = [sys.executable, "-m", "benchmarks.call", "--agent", str(agent_file), "--script", str(script)]
        # judged by the booking service and the reply transcripts: no listener pass after the call
        cmd += ["--pipeline", "parley", "--out", str(out / name), "--json", str(report), "--no-listen"]
        if livekit:  # on loopback: the worker must reach the booking service on this host
            cmd += ["--livekit", "on", "--isolation", "loopback", "--reply-timeout-s", str(REPLY_TIMEOUT_S)]
        env = dict(os.environ)
        if target is not None:
            env |= {"PARLEY_LLM_BASE_URL": target.url, "PARLEY_LLM_MODEL": target.model}
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        await proc.wait()
    await runner.cleanup()
    try:
        data = json.loads(report.read_text())
        res.replies = [str(t.get("reply_text", "")) for t in _turn_rows(data)]
        res.v2v_ms = [float(t["v2v_ms"]) for t in _turn_rows(data) if t.get("v2v_ms") is not None]
    except (OSError, ValueError, KeyError) as e:
        res.problem = f"no call report ({type(e).__name__})"
    ok, res.wrong_bookings = booking_matches(state_of(calendar)["bookings"], task["outcome"], start)
    res.right = ok and _said(res.replies, task["outcome"]) and not res.problem
    res.turns = len(_lines(task)) if res.right else 0
    res.apologies = sum(1 for r in res.replies if APOLOGY.search(r) and not _tool_refusal(r))
    return res


def _turn_rows(data: Any) -> list[dict[str, Any]]:
    run = data[0] if isinstance(data, list) else data
    rows = run.get("turns") or run.get("results", [{}])[0].get("turns", [])
    return [r for r in rows if isinstance(r, dict)]


# --- report -----------------------------------------------------------------------------------------------


def summary(results: list[TaskResult]) -> dict[str, Any]:
    right = [r for r in results if r.right]
    v2v = sorted(v for r in results for v in r.v2v_ms)
    return {
        "tasks": len(results),
        "right": len(right),
        "success": round(len(right) / max(1, len(results)), 3),
        "turns_to_success_mean": round(sum(r.turns for r in right) / max(1, len(right)), 2),
        "wrong_bookings": sum(r.wrong_bookings for r in results),
        "apology_lines": sum(r.apologies for r in results),
        "v2v_p50_ms": round(v2v[len(v2v) // 2]) if v2v else None,
        "v2v_p95_ms": round(v2v[min(len(v2v) - 1, int(0.95 * len(v2v)))]) if v2v else None,
        "llm_slot_reads": sum(len(r.extracted) for r in results),
    }


async def main_async(args: argparse.Namespace) -> int:
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    files = sorted(p for s in splits for p in (TASKS / s).glob("*.yaml"))
    if args.only:
        files = [p for p in files if any(o in p.stem for o in args.only.split(","))]
    if not files:
        print(f"error: no task files under {TASKS} for split {args.split}", file=sys.stderr)
        return 2
    llm = None
    agent_file = Path(args.agent)
    from worker.agent_file import load_agent_file

    target = LlmTarget(args.llm, args.llm_model, external=True) if args.llm else None
    if target is None and not args.audio and load_agent_file(agent_file).flow is None:
        from worker.llm_server import MODEL_ALIAS, EmbeddedLLM

        llm = EmbeddedLLM()
        target = LlmTarget(await asyncio.to_thread(llm.start), MODEL_ALIAS, external=False)
    results = []
    try:
        for path in files:
            task = load_task(path)
            name = f"{path.parent.name}/{path.stem}"
            if args.audio:
                r = await run_audio(
                    task, path.stem, agent_file, args.port, args.livekit, Path(args.out), target
                )
            else:
                r = await run_text(task, name, agent_file, args.port, target)
            r.task = name
            results.append(r)
            mark = "ok " if r.right else "BAD"
            print(
                f"{mark} {name}: turns {r.turns}, wrong {r.wrong_bookings}, apologies {r.apologies}",
                f"LLM read {r.extracted}" if r.extracted else "",
                r.problem,
            )
            if not r.right and args.verbose:
                for line in r.replies:
                    print(f"      agent: {line}")
    finally:
        if llm is not None:
            llm.close()
    report = {"agent": str(agent_file), "mode": "audio" if args.audio else "text", **summary(results)}
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps({**report, "results": [asdict(r) for r in results]}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tasks", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--split", choices=["dev", "test", "all", "unseen"], default="dev", help="all = dev and test"
    )
    ap.add_argument("--agent", default=str(ROOT / "examples" / "dental_clinic.yaml"))
    ap.add_argument("--only", help="run the tasks whose file name contains this (a,b: either)")
    ap.add_argument("--audio", action="store_true", help="through benchmarks.call (voice, STT, TTS)")
    ap.add_argument("--livekit", action="store_true", help="with --audio: through a local LiveKit room")
    ap.add_argument(
        "--port", type=int, default=8765, help="the booking service's port (--audio: the agent file's)"
    )
    ap.add_argument(
        "--llm",
        metavar="URL",
        help="an external OpenAI-compatible LLM (/v1 URL): a flow reads missed slots through it, free talk "
        "talks through it; with --audio the worker gets it as PARLEY_LLM_BASE_URL",
    )
    ap.add_argument("--llm-model", default="local", help="the model name to ask --llm for")
    ap.add_argument("--out", default="out/tasks")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the replies of failed tasks")
    args = ap.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
