"""A scripted call through a real local LiveKit room (`benchmarks.call --livekit`, `make demo`).

`run_livekit_call` starts livekit-server and the Parley worker (`simulator.livekit_stack`: a sealed network
namespace when root, else plain loopback), then runs the scripted caller (`simulator.room_caller`) as its own
process in that network and turns its record into a `CallResult` (`simulator.room_result`).
`run_room_benchmark` interleaves pipelines behind one server.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .call_plan import TurnPlan, default_filler_texts, plan_to_json
from .livekit_stack import (
    API_KEY,
    API_SECRET,
    PYTHON,
    REPO,
    ComponentMissing,
    E2EStack,
    StackError,
    StackOptions,
    livekit_server_problem,
    netns_available,
)
from .offline import CallResult
from .room_caller import CallerError, RoomCallRecord
from .room_result import to_call_result

log = logging.getLogger("parley.sim.room_runner")


# --- the runner: stack + worker + caller ---------------------------------------------------------


@dataclass(frozen=True)
class LiveKitCallOptions:
    out_dir: Path  # logs, server config and the caller's record
    isolation: Literal["auto", "netns", "loopback"] = "auto"  # auto: netns when allowed, else loopback
    base_env: Mapping[str, str] = field(default_factory=dict)  # e.g. the caller's PARLEY_* settings
    worker_env: Mapping[str, str] = field(default_factory=dict)
    worker_options: Mapping[str, str] = field(default_factory=dict)  # `worker.py --set NAME=VALUE`
    capture: bool = False  # netns only: capture and check that no packet left the namespace
    join_timeout_s: float = 90.0
    reply_timeout_s: float = 30.0
    worker_ready_timeout_s: float = 180.0
    call_timeout_s: float = 600.0
    stay_s: float = 0.0
    """After its turns the caller stays on the line this long, or until the agent ends the call."""
    dispatch_metadata: str = ""
    """The agent's job metadata (an outbound call's request, worker/outbound.py)."""
    answers: bool = False
    """The agent placed the call: the caller speaks first (the callee's pick-up line or machine greeting)."""
    caller_nice: int = 0
    """Run the scripted caller at this `nice` level. Real callers are not on the host; a deprioritised
    caller lends the host the cores it would otherwise contend for (load runs; 0 = as before)."""


def room_unavailable_reason() -> str | None:
    """One line saying why a real local room cannot be used here, or None when it can."""
    problem = livekit_server_problem()
    if problem:
        return problem
    if not (REPO / "worker.py").is_file():
        return "worker.py is not in this checkout"
    return None


def stack_options(opts: LiveKitCallOptions, with_worker: bool = True) -> StackOptions:
    isolation = opts.isolation
    if isolation == "auto":
        isolation = "netns" if netns_available() else "loopback"
    return StackOptions(
        out_dir=opts.out_dir,
        isolation=isolation,
        with_worker=with_worker,
        capture=opts.capture and isolation == "netns",
        base_env=dict(opts.base_env),
        worker_env=dict(opts.worker_env),
        worker_options=dict(opts.worker_options),
        worker_ready_timeout_s=opts.worker_ready_timeout_s,
    )


def run_caller(
    stack: E2EStack,
    turns: Sequence[Path | TurnPlan],
    out: Path,
    opts: LiveKitCallOptions,
    agent_name: str | None = None,
) -> RoomCallRecord:
    """Run the caller as its own process inside the stack's network and read back what it recorded."""
    plan = [t if isinstance(t, TurnPlan) else TurnPlan(t) for t in turns]
    out.mkdir(parents=True, exist_ok=True)
    plan_file = out / "plan.json"
    plan_file.write_text(json.dumps(plan_to_json(plan)))
    cmd = [
        *(str(PYTHON), "-m", "simulator.room_caller", "caller"),
        *("--url", stack.livekit_url, "--api-key", API_KEY, "--api-secret", API_SECRET),
        *("--agent-name", agent_name or stack.opts.agent_name, "--out", str(out)),
        *("--join-timeout-s", str(opts.join_timeout_s), "--reply-timeout-s", str(opts.reply_timeout_s)),
        *("--plan", str(plan_file)),
        *(("--stay-s", str(opts.stay_s)) if opts.stay_s else ()),
        *(("--dispatch-metadata", opts.dispatch_metadata) if opts.dispatch_metadata else ()),
        *(("--answers",) if opts.answers else ()),
    ]
    if opts.caller_nice:
        cmd = ["nice", "-n", str(opts.caller_nice), *cmd]
    res = stack.run_in_ns(cmd, timeout=opts.call_timeout_s)
    if res.returncode != 0:
        lines = (res.stderr or res.stdout).strip().splitlines()
        raise CallerError(f"the caller failed: {lines[-1] if lines else f'exit code {res.returncode}'}")
    return RoomCallRecord.load(out)


def run_call_on_stack(
    stack: E2EStack,
    turns: Sequence[Path | TurnPlan],
    out: Path,
    opts: LiveKitCallOptions | None = None,
    pipeline: str = "parley",
    agent_name: str | None = None,
) -> CallResult:
    """One scripted call through a stack that is already up (with its worker)."""
    opts = opts or LiveKitCallOptions(out_dir=out)
    record = run_caller(stack, turns, out, opts, agent_name)
    return to_call_result(record, default_filler_texts(), pipeline=pipeline)


def run_livekit_call(turns: Sequence[Path | TurnPlan], opts: LiveKitCallOptions) -> CallResult:
    """Start a local stack (server + worker), make one scripted call through it, tear it all down."""
    stack = E2EStack(stack_options(opts))
    t = time.monotonic()
    with stack:
        log.info(
            "local LiveKit stack up",
            extra={"isolation": stack.opts.isolation, "seconds": round(time.monotonic() - t, 1)},
        )
        result = run_call_on_stack(stack, turns, opts.out_dir / "caller", opts)
    if stack.opts.capture:
        count, leaks = stack.capture_summary()
        if leaks:
            result.errors.append(f"{len(leaks)} of {count} packets left the namespace, first: {leaks[0]}")
    return result


def try_room_call(
    turns: Sequence[Path | TurnPlan], opts: LiveKitCallOptions
) -> tuple[CallResult | None, str]:
    """(the call's result, "") through a real local room, or (None, one line saying why there is none)."""
    reason = room_unavailable_reason()
    if reason:
        return None, reason
    try:
        return run_livekit_call(turns, opts), ""
    except (ComponentMissing, StackError, CallerError) as err:
        first = str(err).strip().splitlines()
        return None, first[0] if first else type(err).__name__


@dataclass(frozen=True)
class RoomRun:
    """One call of an interleaved benchmark."""

    round: int
    pipeline: str
    call: str
    result: CallResult


def wait_until_quiet(stack: E2EStack, max_s: float = 180.0, idle_pct: float = 15.0) -> float:
    """Wait until the stack's processes (workers loading models in their job processes) stop using the CPU,
    so the first round is not measured against model loading. Returns the seconds waited."""
    import psutil

    t0 = time.monotonic()
    procs: list[psutil.Process] = []
    for mp in stack.procs:
        try:
            root = psutil.Process(mp.popen.pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue

    def busy() -> float:
        """CPU % of every process since the last call (the first call starts the count)."""
        total = 0.0
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += p.cpu_percent(None)
        return total

    while time.monotonic() - t0 < max_s:
        busy()
        time.sleep(2.0)
        if busy() < idle_pct:
            break
    return time.monotonic() - t0


def run_room_benchmark(
    calls: Mapping[str, Sequence[TurnPlan]],
    pipelines: Sequence[str],
    runs: int,
    opts: LiveKitCallOptions,
    on_run: Callable[[RoomRun], None] | None = None,
) -> list[RoomRun]:
    """Every pipeline served by its own real worker process (`--set pipeline=…`, one agent name each) behind
    one livekit-server; each round calls every pipeline with every call, the pipeline order rotated."""
    from .call_plan import rotated

    stack = E2EStack(stack_options(opts, with_worker=False))
    runs_out: list[RoomRun] = []
    with stack:
        for name in pipelines:
            log_name = "worker" if name == "parley" else f"worker-{name}"
            stack.start_worker(name=log_name, env={"PARLEY_AGENT_NAME": name}, options={"pipeline": name})
        waited = wait_until_quiet(stack)
        log.info("workers ready", extra={"pipelines": list(pipelines), "waited_s": round(waited, 1)})
        for r in range(runs):
            for name in rotated(list(pipelines), r):
                for call, plan in calls.items():
                    out = opts.out_dir / f"round{r}" / f"{name}-{call}"
                    res = run_call_on_stack(stack, plan, out, opts, pipeline=name, agent_name=name)
                    run = RoomRun(r, name, call, res)
                    runs_out.append(run)
                    if on_run:
                        on_run(run)
    return runs_out
