"""The worker sets livekit-agents' event-loop watchdog to a 250 ms threshold unless the operator chose one."""

from __future__ import annotations

import pytest
from livekit.agents.telemetry import loop_monitor

from worker.server import quiet_loop_monitor


def test_the_watchdog_threshold_defaults_to_250_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS", raising=False)
    quiet_loop_monitor()
    thresholds = loop_monitor.LoopMonitorThresholds.from_env()
    assert thresholds is not None and thresholds.warn == pytest.approx(0.25)
    # livekit-agents ticks at a fifth of the threshold, at most every 50 ms: 20 ms at its own default
    assert loop_monitor._tick_interval_for(thresholds.warn) == pytest.approx(0.05)


def test_an_operators_threshold_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS", "0")
    quiet_loop_monitor()
    assert loop_monitor.LoopMonitorThresholds.from_env() is None  # 0 turns the watchdog off
