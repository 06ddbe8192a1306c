"""The worker's measured headroom (worker/headroom.py): real job-process signals written and read through
the private folder, the window, the idle-host rule, and the verdict a job process reads before joining."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from worker.headroom import (
    VERDICT_FILE,
    CallCost,
    HeadroomOptions,
    HostHeadroom,
    JobSignals,
    Reading,
    admits_new_call,
    pressure,
    signal_values,
)


def opts(tmp_path: Path, **kw: float) -> HeadroomOptions:
    return HeadroomOptions(folder=tmp_path / "headroom", **kw)  # type: ignore[arg-type]


def test_pressure_is_the_worst_signal_against_its_limit_and_lag_counts_when_it_lasts(tmp_path: Path) -> None:
    o = opts(tmp_path)
    assert pressure(signal_values([]), o) == (0.0, "")
    calm = Reading(loop_lag_s=0.01, voice_rtf=0.14)
    assert pressure(signal_values([calm]), o) == pytest.approx((0.2, "voice_rtf"))
    engine = Reading(stt_queue_s=0.75, job=False)
    assert pressure(signal_values([calm, engine]), o) == pytest.approx((1.5, "stt_queue"))
    # one blocked second among calm ones is a burst, not a full host; lag that lasts is
    burst = [Reading(loop_lag_s=0.5), *[Reading(loop_lag_s=0.02)] * 4]
    assert pressure(signal_values(burst), o)[0] < 1.0
    assert pressure(signal_values([Reading(loop_lag_s=0.3)] * 5), o) == pytest.approx((1.5, "loop_lag"))


def test_a_full_host_refuses_the_next_call_until_its_window_passes_but_an_idle_host_admits(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    host = HostHeadroom(opts(tmp_path, window_s=5.0), clock=lambda: now[0])
    host.add(Reading(loop_lag_s=0.4))  # twice the limit
    full = host.verdict(calls=2)
    assert full.pressure == pytest.approx(2.0) and full.why == "loop_lag" and not full.admits
    assert host.verdict(calls=0).admits  # no call on it: a busy neighbour does not close the host
    now[0] += 6.0
    assert host.verdict(calls=2).admits and host.verdict(calls=2).pressure == 0.0


class Counters:
    """The CPU counters a CallCost reads, advanced by hand: the host's busy seconds and the worker tree's."""

    def __init__(self) -> None:
        self.busy = 0.0
        self.tree = 0.0


def _cost(tmp_path: Path, **kw: float) -> tuple[CallCost, Counters, list[float]]:
    c = Counters()
    now = [0.0]
    seen = [0.0]

    def tree() -> float:
        d, seen[0] = c.tree - seen[0], c.tree
        return d

    cost = CallCost(opts(tmp_path, **kw), clock=lambda: now[0], busy=lambda: c.busy, tree=tree)
    cost.cores = 2
    return cost, c, now


def test_one_more_call_is_refused_when_the_projected_cpu_passes_the_limit(tmp_path: Path) -> None:
    """The measured cost of a call replaces the prior as calls add up; neighbours' CPU counts against the
    host; a call already dispatched is let in while the calls counted (itself among them) fit."""
    cost, c, now = _cost(tmp_path, call_cores_prior=0.35, prior_weight_s=60.0, window_s=5.0)
    cost.update(0)
    for _ in range(600):  # 10 minutes of 2 calls that cost 0.3 cores each; neighbours take 0.2 cores
        now[0] += 1.0
        c.tree += 0.6
        c.busy += 0.6 + 0.2
        cost.update(2)
    assert cost.per_call() == pytest.approx(0.3, abs=0.01)
    assert cost.neighbours() == pytest.approx(0.2, abs=0.01)
    assert cost.projected(3) == pytest.approx((0.2 + 0.9) / 2, abs=0.01)  # 0.55: a third call fits
    host = HostHeadroom(opts(tmp_path), cost=cost, clock=lambda: now[0])
    v = host.verdict(calls=2)
    assert v.admits and v.signals["cpu"] == pytest.approx(0.55, abs=0.01)
    for _ in range(10):  # a neighbour takes 0.5 cores more: 0.7 + 3 x 0.3 = 0.8 of 2 cores with a third
        now[0] += 1.0
        c.tree += 0.6
        c.busy += 0.6 + 0.7
        cost.update(2)
    full = host.verdict(calls=2)
    assert not full.admits and full.why == "cpu" and full.over < 1.0  # two fit, a third does not
    host.publish(full)
    # dispatched after the verdict: one more than it counted does not fit
    assert not admits_new_call(host.opts, since=now[0] + 0.1, clock=lambda: now[0] + 0.2).admits
    # a verdict made after this call was dispatched counts it already: it stays while the calls fit
    assert admits_new_call(host.opts, since=now[0] - 0.1, clock=lambda: now[0]).admits


def test_the_prior_holds_until_calls_are_measured(tmp_path: Path) -> None:
    cost, c, now = _cost(tmp_path, call_cores_prior=0.35, prior_weight_s=60.0)
    cost.update(0)
    assert cost.per_call() == pytest.approx(0.35)
    for _ in range(30):  # idle: the worker tree's own start-up is not what a call costs
        now[0] += 1.0
        c.tree += 1.0
        c.busy += 1.0
        cost.update(0)
    assert cost.per_call() == pytest.approx(0.35, abs=0.01)


def test_speech_engine_queue_delay_counts(tmp_path: Path) -> None:
    engine = SimpleNamespace(last_capacity=(time.time(), {"queue_delay_s": 0.8, "ready": True}))
    host = HostHeadroom(opts(tmp_path), speech_engine=engine)
    host.collect()
    v = host.verdict(calls=1)
    assert v.why == "stt_queue" and v.pressure == pytest.approx(1.6) and not v.admits


class Voice:
    def recent_rtf(self, window_s: float) -> float:
        return 0.2


async def test_a_lagging_call_marks_the_host_full_and_a_new_call_reads_that(tmp_path: Path) -> None:
    o = opts(tmp_path)
    signals = JobSignals(Voice(), o)
    signals.start()
    await asyncio.sleep(0.2)
    time.sleep(0.4)  # the call's loop blocked: what a starved CPU does to every call on it
    await asyncio.sleep(1.2)
    files = list(o.folder.glob("job-*.json"))
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    assert doc["loop_lag_s"] >= 0.3 and doc["voice_rtf"] == 0.2
    host = HostHeadroom(o)
    host.collect()
    verdict = host.verdict(calls=1)
    assert verdict.why == "loop_lag" and not verdict.admits
    host.publish(verdict)
    assert (o.folder.stat().st_mode & 0o777) == 0o700
    read = admits_new_call(o)
    assert not read.admits and read.why == "loop_lag" and read.calls == 1
    await signals.aclose()
    assert not files[0].exists()  # the call ended: its reading goes with it
    # a verdict nobody refreshed (the worker is gone) never keeps calls out
    assert admits_new_call(o, clock=lambda: time.time() + o.stale_s + 1).admits
    (o.folder / VERDICT_FILE).unlink()
    assert admits_new_call(o).admits
    host.close()  # the worker stops: nothing of it is left behind
    assert not o.folder.exists()


def test_the_worker_reports_full_to_livekit_from_measured_pressure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker import load
    from worker.settings import get_settings

    o = opts(tmp_path)
    host = HostHeadroom(o)
    monkeypatch.setattr(load, "HEADROOM", host)
    jobs = SimpleNamespace(active_jobs=[object()])
    calm = load.compute_load(jobs)  # type: ignore[arg-type]
    host.add(Reading(stt_queue_s=1.0))
    full = load.compute_load(jobs)  # type: ignore[arg-type]
    target = get_settings().livekit_target_load  # livekit-server dispatches nothing at or above it
    assert full >= target and calm < target
    assert not admits_new_call(o).admits  # and the job processes are told
