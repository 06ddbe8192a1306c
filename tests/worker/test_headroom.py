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
    HeadroomOptions,
    HostHeadroom,
    JobSignals,
    Reading,
    admits_new_call,
    pressure,
)


def opts(tmp_path: Path, **kw: float) -> HeadroomOptions:
    return HeadroomOptions(folder=tmp_path / "headroom", **kw)  # type: ignore[arg-type]


def test_pressure_is_the_worst_signal_against_its_limit(tmp_path: Path) -> None:
    o = opts(tmp_path)
    assert pressure([], o) == (0.0, "")
    calm = Reading(loop_lag_s=0.01, stt_queue_s=0.1, voice_rtf=0.2)
    assert pressure([calm], o) == pytest.approx((0.4, "voice_rtf"))
    assert pressure([calm, Reading(stt_queue_s=0.75)], o) == pytest.approx((1.5, "stt_queue"))
    assert pressure([Reading(loop_lag_s=0.3)], o)[1] == "loop_lag"


def test_a_full_host_refuses_the_next_call_until_its_window_passes_but_an_idle_host_admits(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    host = HostHeadroom(opts(tmp_path, window_s=5.0), clock=lambda: now[0])
    host.add(Reading(loop_lag_s=0.3))  # twice the limit
    full = host.verdict(calls=2)
    assert full.pressure == pytest.approx(2.0) and full.why == "loop_lag" and not full.admits
    assert host.verdict(calls=0).admits  # no call on it: a busy neighbour does not close the host
    now[0] += 6.0
    assert host.verdict(calls=2).admits and host.verdict(calls=2).pressure == 0.0


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
