"""`benchmarks.load --livekit` keys: worker failures vs the model's own apologies, the host's parts, and
the capacity verdict."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.capacity import CapacityOptions, capacity_of, run_holds, sweep
from benchmarks.load_room import RoomLoad, host_part, report
from simulator.offline import CallResult, TurnResult
from worker.agent import APOLOGY
from worker.stt_hold import HOLD


def _turn(reply: str, problem: str = "", error: str = "", v2v: float | None = 900.0) -> TurnResult:
    return TurnResult(
        file="t.wav", speech_start=0, speech_end=1, v2v_ms=v2v, reply_text=reply, problem=problem, error=error
    )


def test_errors_are_the_workers_failures_and_apologies_the_models_own() -> None:
    turns = [
        _turn("I'm sorry, I don't have that information.", problem="apology"),  # the model wrote it
        _turn(APOLOGY["en"], problem="apology"),  # the worker's: the LLM failed
        _turn(HOLD["en"], problem="apology"),  # the worker's: the speech engine was down
        _turn("", error="no reply within 10 s", v2v=None),
        _turn("Sure, Wednesday at ten works."),
    ]
    res = CallResult("call0", 0.0, None, turns, [], None, None)  # type: ignore[arg-type]
    state = RoomLoad(results=[res], errors=["call1-0: CallerError: the caller failed"])
    out = report(state, calls=2, minutes=1.0)
    assert out["errors"] == 4
    assert out["apologies"] == 1 and "information" in out["apology_list"][0]
    assert not any("information" in e for e in out["error_list"])


def test_job_processes_are_told_from_the_forkserver_and_the_engines() -> None:
    fork = "python -c from multiprocessing.forkserver import main; main(8, 9, ['worker.forkserver_models'])"
    assert host_part(fork, child_of_worker=True) == "forkserver"
    assert host_part(fork, child_of_worker=False) == "job"
    assert host_part("python -c from multiprocessing.resource_tracker import main;main(7)", True) == "other"
    assert host_part("python -m plugins.whisper serve --supervised --address unix:///x", True) == "stt-engine"
    assert host_part("python -m worker.llm_server --port 0", True) == "llm"
    assert (
        host_part("python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)", True)
        == "job"
    )


def _run(p95: float | None, underruns: int = 0, turns: int = 20) -> dict[str, Any]:
    return {
        "turns": turns,
        "underruns": underruns,
        "v2v_ms": {"p50": 600, "p95": p95, "p99": None},
        "errors": 0,
    }


def test_a_run_holds_only_within_the_bound_without_underruns() -> None:
    opts = CapacityOptions()
    assert run_holds(_run(1500.0), opts)
    assert not run_holds(_run(1501.0), opts)
    assert not run_holds(_run(900.0, underruns=1), opts)
    assert not run_holds(_run(None, turns=0), opts)


def test_capacity_is_the_largest_n_whose_three_runs_all_hold() -> None:
    opts = CapacityOptions()
    runs = {2: [_run(900)] * 3, 3: [_run(1200)] * 3, 4: [_run(1300), _run(1700), _run(1200)]}
    assert capacity_of(runs, opts) == 3
    assert capacity_of({2: [_run(900)] * 2}, opts) is None  # two runs are not three
    assert capacity_of({2: [_run(2000)] * 3, 3: [_run(900)] * 3}, opts) is None  # counted up from 2 only


def test_the_sweep_stops_at_the_first_n_that_fails() -> None:
    # recorded p95s per number of calls: 4 calls fail on their second run, 5 is never tried
    recorded = {2: [800.0] * 3, 3: [1100.0] * 3, 4: [1400.0, 1800.0, 1300.0], 5: [900.0] * 3}
    asked: list[int] = []

    def run(calls: int, minutes: float) -> dict[str, Any]:
        assert minutes == pytest.approx(2.0)
        asked.append(calls)
        return _run(recorded[calls][asked.count(calls) - 1])

    out = sweep(run)
    assert out["capacity"] == 3
    assert asked == [2, 2, 2, 3, 3, 3, 4, 4]
    assert [r["holds"] for r in out["runs"]["4"]] == [True, False]


def test_a_deprioritised_caller_runs_under_nice(tmp_path: Any) -> None:
    """`--caller-nice N` reaches the caller's command line; 0 leaves it as it was."""
    import subprocess
    from types import SimpleNamespace

    from simulator.room_runner import CallerError, LiveKitCallOptions, run_caller

    class Stack:
        livekit_url = "ws://127.0.0.1:1"
        opts = SimpleNamespace(agent_name="parley")
        cmds: list[list[str]] = []

        def run_in_ns(self, cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
            self.cmds.append(list(cmd))
            return subprocess.CompletedProcess(cmd, 1, "", "no room here")

    stack = Stack()
    for nice in (19, 0):
        with pytest.raises(CallerError, match="no room here"):
            opts = LiveKitCallOptions(out_dir=tmp_path, caller_nice=nice)
            run_caller(stack, [], tmp_path / str(nice), opts)  # type: ignore[arg-type]
    assert stack.cmds[0][:3] == ["nice", "-n", "19"] and "simulator.room_caller" in stack.cmds[0]
    assert stack.cmds[1][0] != "nice"


def test_memory_growth_of_the_long_lived_parts_is_their_summed_slope_over_the_second_half() -> None:
    from benchmarks.load_room import shared_rss_slope

    flat = [(float(t), {"worker": 240.0, "llm": 650.0}) for t in range(0, 120, 2)]
    leaky = [(t, {**p, "engine": 250.0 + t / 10}) for t, p in flat]  # 6 MB/min
    warming = [(t, {**p, "engine": 150.0 + min(t, 30.0) * 3}) for t, p in flat]  # grew, then held
    assert shared_rss_slope(flat) == pytest.approx(0.0, abs=0.01)
    assert shared_rss_slope(leaky) == pytest.approx(6.0, abs=0.05)
    assert shared_rss_slope(warming) == pytest.approx(0.0, abs=0.01)  # the first half is warm-up


def test_cpu_is_reported_per_call_minute_served_by_part_with_the_callers_apart() -> None:
    from benchmarks.load_room import cpu_cores, cpu_per_call_minute

    # two samples 60 s apart: the jobs used 60 CPU s, the engine 30, the scripted callers 90
    first = {1: ("jobs", 10.0), 2: ("stt-engine", 5.0), 3: ("callers", 0.0)}
    last = {1: ("jobs", 70.0), 2: ("stt-engine", 35.0), 3: ("callers", 90.0), 4: ("llm", 12.0)}
    cores = cpu_cores([first, last], seconds=60.0)
    assert cores == {"callers": 1.5, "jobs": 1.0, "llm": 0.2, "stt-engine": 0.5}
    per = cpu_per_call_minute(cores, seconds=60.0, call_minutes=2.0)  # two calls of a minute each
    assert per["jobs"] == 30.0 and per["stt-engine"] == 15.0 and per["llm"] == 6.0
    assert per["callers"] == 45.0 and per["host_parts"] == 51.0  # the callers are not the host's
    served = CallResult("call0", 100.0, None, [], [], None, None, end=160.0)  # type: ignore[arg-type]
    unsent = "call3-0: CallerError: the caller failed: caller: no agent joined room call-1 within 90 s"
    state = RoomLoad(results=[served], cpu=[first, last], seconds=60.0, refused=3, errors=[unsent])
    out = report(state, calls=2, minutes=1.0)
    assert out["refused"] == 3 and out["call_minutes_served"] == 1.0
    assert out["cpu_s_per_call_minute"]["host_parts"] == 102.0  # one call-minute served, not two
    assert out["not_dispatched"] == 1 and out["errors"] == 0  # a full host's, not a failure
    # the CPU voice's seconds, from the calls' "call ended" lines, are shown apart from the job processes
    audits = [{"open_stt_streams": 0, "open_tts_streams": 0, "voice_cpu_s": 12.0}]
    state = RoomLoad(results=[served], cpu=[first, last], seconds=60.0, audits=audits)
    out = report(state, calls=2, minutes=1.0)
    assert out["cpu_cores"]["voice"] == 0.2 and out["cpu_cores"]["jobs"] == 0.8
    assert out["cpu_s_per_call_minute"]["host_parts"] == 102.0  # the same total, split one more way


def test_the_headroom_the_admission_saw_is_summed_up_over_the_samples_with_calls() -> None:
    from benchmarks.load_room import headroom_summary

    idle = {"pressure": 0.0, "calls": 0, "admits": True, "signals": {}}
    calm = {"pressure": 0.8, "calls": 2, "admits": True, "signals": {"cpu": 0.6, "loop_lag": 0.01}}
    full = {"pressure": 1.2, "calls": 3, "admits": False, "signals": {"cpu": 0.9, "loop_lag": 0.02}}
    out = headroom_summary([idle, calm, calm, full])
    assert out["samples"] == 3 and out["full_share"] == pytest.approx(0.33)
    assert out["cpu"]["max"] == 0.9 and out["cpu"]["p50"] == 0.6 and out["pressure"]["max"] == 1.2
    assert headroom_summary([idle]) == {"samples": 0}
