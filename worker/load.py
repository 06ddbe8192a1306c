"""The load this host reports to LiveKit: its calls against PARLEY_MAX_CALLS and the TTS engine's fill against
PARLEY_LOAD_THRESHOLD, scaled so that a full host reports livekit-server's dispatch limit.
"""

from __future__ import annotations

from livekit.agents import AgentServer

from .headroom import HostHeadroom
from .settings import get_settings

_engine_fill_configured = False


def engine_load() -> float:
    """The TTS engine's fill (0..1), or 0 when there is no engine."""
    global _engine_fill_configured
    try:
        from plugins.orpheus.capacity import engine_fill  # type: ignore[import-not-found]
    except ImportError:
        return 0.0
    if not _engine_fill_configured:
        from .pipeline import configure_orpheus_fill

        configure_orpheus_fill(get_settings())
        _engine_fill_configured = True
    try:
        return float(engine_fill())
    except Exception:
        return 1.0  # an engine we cannot ask is treated as full


def host_pressure(server: AgentServer) -> float:
    """How full this host is: 1.0 = full. Its call slots count against PARLEY_MAX_CALLS, the TTS engine's
    fill (and host CPU, if asked) against PARLEY_LOAD_THRESHOLD.

    Host CPU alone is a poor signal on a shared or bursty machine (one busy neighbour marks the worker full
    and calls are refused), so by default the worker counts its own calls."""
    settings = get_settings()
    pressure = max(len(server.active_jobs) / settings.max_calls, engine_load() / settings.load_threshold)
    if settings.load_signal == "calls+cpu":
        from livekit.agents.worker import _DefaultLoadCalc

        pressure = max(pressure, _DefaultLoadCalc.get_load(server) / settings.load_threshold)
    return pressure


HEADROOM: HostHeadroom | None = (
    None  # the worker process's (server.main() makes it); job processes read its verdict
)


def measured_pressure(active_calls: int) -> float:
    """Measured headroom (worker/headroom.py) as pressure; the verdict is left for job processes."""
    if HEADROOM is None:
        return 0.0
    HEADROOM.collect(active_calls)
    verdict = HEADROOM.verdict(active_calls)
    HEADROOM.publish(verdict)
    return verdict.pressure if active_calls else 0.0  # an idle host takes a call whatever its neighbours do


def compute_load(server: AgentServer) -> float:
    """The load LiveKit sees: the host's pressure scaled so that full = the server's dispatch limit.

    livekit-server sends no job to a worker that reports a load at or above its `agents.target_load`
    (0.7 unless its config says otherwise; measured on 1.13.5: 0.699 dispatched, 0.70 not), whatever
    threshold the worker itself uses. Reporting calls / max_calls as is made a 4-call host refuse its 4th
    call at 0.75. Scaled, a host takes calls until it is full, on any server left at its defaults."""
    pressure = max(host_pressure(server), measured_pressure(len(server.active_jobs)))
    return min(1.0, pressure * get_settings().livekit_target_load)
