"""One call's job: `prewarm` loads the models once per job process, `entrypoint` runs each call (inbound, or
outbound once answered) in an AgentSession, `stock_entrypoint` the benchmarks' baseline wiring. Both take
the worker's settings first: `worker/server.py` composes them once and hands them to every job process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, Any

from livekit.agents import JobContext, JobProcess
from livekit.plugins import openai as _openai_plugin  # noqa: F401  (registers on the main thread)
from livekit.plugins import silero as _silero_plugin  # noqa: F401

from turn_detection import Profile, params_for

from .agent_file import call_tools, effective_settings
from .headroom import HeadroomOptions, JobSignals, admits_new_call
from .livekit_patches import duck_room_output
from .memory import release_free_memory, tune_allocator
from .outbound import add_call_context, callee_audio, prefetch
from .outbound_call import answer_outbound, outbound_dial
from .reporting import call_reporter, report_sender
from .settings import Settings, use_settings
from .sip import (
    DtmfHandler,
    DtmfOptions,
    dtmf_as_user_input,
    hang_up,
    input_sample_rate,
    is_sip_participant,
    pick_turn_profile,
)
from .turn_marks import RoomDataSender, RoomMetricsPublisher, StageHistograms, TurnMarks

if TYPE_CHECKING:
    from turn_detection.lm_eot import LmEotScorer

log = logging.getLogger("parley.worker")

INPUT_FRAME_MS = 20
"""Room audio handed to VAD and STT in frames this long (LiveKit's default 50 ms holds speech back)."""


def prewarm(settings: Settings, proc: JobProcess) -> None:
    """Runs once per job process before any call: VAD, STT, TTS (and its engine connection), phrase cache.
    `settings` are the worker's, composed once in `main` and handed to every job process."""
    from .forkserver_signals import exit_cleanly_until_started, started
    from .pipeline import load_components

    exit_cleanly_until_started()  # a worker shutting down now kills this process: it held no call
    try:
        tune_allocator()  # before the models load: their buffers then go back to the kernel when freed
        use_settings(settings)
        logging.getLogger("parley").setLevel(settings.log_level)  # LiveKit's CLI sets only the root level
        if settings.pipeline != "parley":  # a baseline for the benchmarks (worker/stock_pipeline.py)
            from .stock_pipeline import load_stock_components, stock_options

            opts = stock_options(settings.pipeline)
            proc.userdata["stock"] = load_stock_components(settings, settings.llm_base_url, opts)
            return
        comp = load_components(settings, settings.llm_base_url)
        proc.userdata["components"] = comp
    finally:
        started()


async def entrypoint(settings: Settings, ctx: JobContext) -> None:
    from .pipeline import build_call, load_components, turn_options

    use_settings(settings)  # for the code that asks get_settings() in this job process
    if settings.pipeline != "parley":
        await stock_entrypoint(ctx, settings)
        return
    dispatched = time.time()
    comp = ctx.proc.userdata.get("components") or load_components(settings, settings.llm_base_url)
    await ctx.connect()
    warm_up = getattr(comp.tts, "warm_up", None)
    if warm_up is not None:  # open the engine connection on this loop now, not on the first reply
        await warm_up()
    served = effective_settings(settings)  # with the agent file's choices
    go_on, call = await outbound_dial(ctx, served)
    if not go_on:
        return
    verdict = admits_new_call(since=dispatched)
    if call is None and not verdict.admits:  # dispatched before the worker's full load reached LiveKit
        await refuse_call(ctx, settings, comp, verdict)
        return
    signals = JobSignals(comp.tts)
    signals.start()
    ctx.add_shutdown_callback(signals.aclose)
    participant = await ctx.wait_for_participant(identity=call.identity if call else None)
    profile = pick_turn_profile(settings.turn_profile, participant)
    phone = is_sip_participant(participant)
    rate = input_sample_rate(profile)
    answer: AsyncIterable[Any] | None = None
    if call is not None:  # the callee's audio, read from the answer on
        answer = prefetch(callee_audio(participant, rate))
    reporter = call_reporter(ctx, served, participant, profile, outbound=call is not None)
    on_end = reporter.log.note_ended_by if reporter else None
    transferred = reporter.log.note_transferred if reporter else None
    tools = call_tools(served, phone, on_transferred=transferred)  # the agent file's, else the phone defaults
    session, agent = build_call(settings, comp, profile, tools, on_call_end=on_end)
    metrics = RoomMetricsPublisher(ctx.room, enabled=settings.room_metrics)
    metrics.attach(session)
    if reporter is not None:
        reporter.attach(session)
        ctx.add_shutdown_callback(report_sender(reporter, metrics))
    ctx.add_shutdown_callback(metrics.aclose)
    ctx.add_shutdown_callback(_hand_back_memory)
    voice_cpu_s = float(getattr(comp.tts, "cpu_s", 0.0))
    ctx.add_shutdown_callback(lambda: audit_open_streams(session, comp, voice_cpu_s))
    if comp.eot_lm is not None:
        scorer = comp.eot_lm
        ctx.add_shutdown_callback(lambda: _log_scorer_use(scorer))
    if phone:
        dtmf = DtmfHandler(
            ctx.room,
            dtmf_as_user_input(session),
            DtmfOptions(max_digits=settings.dtmf_max_digits, inter_digit_timeout_s=settings.dtmf_timeout_s),
        )
        dtmf.attach(participant.identity)
        ctx.add_shutdown_callback(dtmf.aclose)
    marks = turn_marks(ctx, settings, session, agent, comp.tts)
    log.info("call started", extra={"room": ctx.room.name, "profile": profile, "phone": phone})
    if call is not None:
        agent.greet_on_enter = False  # who answered decides what is said first
        if call.context:
            await add_call_context(agent, call.context)
    await session.start(
        agent,
        room=ctx.room,
        record=settings.record_audio,
        room_options=_room_options(settings, call.identity if call else None),
    )
    marks.attach_output(session)
    params = params_for(Profile(profile), turn_options(settings))
    if agent.turns is not None:
        duck_room_output(session, params.duck_db, params.duck_hold_s, agent.turns.hooks)
    if call is not None and answer is not None:
        listening = asyncio.create_task(
            answer_outbound(ctx, served, call, session, agent, answer, rate, reporter)
        )
        ctx.add_shutdown_callback(lambda: _cancel(listening))


async def refuse_call(ctx: JobContext, settings: Settings, comp: Any, verdict: Any) -> None:
    """The host is full: the caller hears one short line and the call ends, instead of joining calls that
    would all degrade together (worker/headroom.py)."""
    from .pipeline import build_call

    log.warning("host full: call refused", extra={"why": verdict.why, "pressure": verdict.pressure})
    participant = await ctx.wait_for_participant()
    session, agent = build_call(settings, comp, pick_turn_profile(settings.turn_profile, participant), [])
    agent.greet_on_enter = False
    await session.start(agent, room=ctx.room, room_options=_room_options(settings))
    await session.say(HeadroomOptions().full_line, allow_interruptions=False, add_to_chat_ctx=False)
    await hang_up(ctx.api, ctx.room.name)


async def _log_scorer_use(scorer: LmEotScorer) -> None:
    """What the end-of-turn scorer cost this job process and how often a decision had its score."""
    log.info("end-of-turn scorer use", extra=scorer.usage())


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()


def _room_options(settings: Settings, identity: str | None = None) -> Any:
    """The caller's audio at the rate Parley's VAD and Whisper use, in short frames: LiveKit's default
    (24 kHz, 50 ms frames) holds each piece of speech up to 50 ms before the VAD sees it.

    When the session closes because the caller hung up, the room is deleted: otherwise the job (and its
    slot in PARLEY_MAX_CALLS) lives on until livekit-server closes the room, `departure_timeout` later (20 s
    by default), and a host at capacity refuses calls it could take."""
    from livekit.agents.voice import room_io

    extra: dict[str, Any] = {"participant_identity": identity} if identity else {}
    return room_io.RoomOptions(
        audio_input=room_io.AudioInputOptions(sample_rate=16_000, frame_size_ms=INPUT_FRAME_MS),
        delete_room_on_close=settings.delete_room_on_hangup,
        **extra,
    )


def turn_marks(ctx: JobContext, settings: Settings, session: Any, agent: Any, tts_model: Any) -> TurnMarks:
    """Per-turn marks to the room (`parley.marks`) and, with a Prometheus port, to histograms."""
    sender = RoomDataSender(ctx.room)
    ctx.add_shutdown_callback(sender.aclose)
    hist = StageHistograms(settings.pipeline) if settings.prometheus_port else None
    send = sender if settings.room_metrics else (lambda _m: None)
    marks = TurnMarks(send, hist)
    marks.attach(session, agent, tts_model)
    return marks


async def stock_entrypoint(ctx: JobContext, settings: Settings) -> None:
    """A baseline call (`--set pipeline=stock|stock-tuned`): the same models, LiveKit's own wiring."""
    from .stock_pipeline import build_stock_call, load_stock_components, stock_options

    opts = stock_options(settings.pipeline)
    comp = ctx.proc.userdata.get("stock") or load_stock_components(settings, settings.llm_base_url, opts)
    await ctx.connect()
    await ctx.wait_for_participant()
    session, agent = build_stock_call(settings, comp)
    marks = turn_marks(ctx, settings, session, agent, comp.tts)
    log.info("call started", extra={"room": ctx.room.name, "pipeline": settings.pipeline})
    await session.start(agent, room=ctx.room, record=settings.record_audio)
    marks.attach_output(session)


def open_streams(comp: Any) -> dict[str, int]:
    """Speech streams of the process's shared STT and TTS that are still open."""
    return {
        "open_stt_streams": int(getattr(comp.stt, "open_streams", 0)),
        "open_tts_streams": int(getattr(comp.tts, "active_streams", 0)),
    }


async def audit_open_streams(session: Any, comp: Any, voice_cpu_s: float = 0.0) -> None:
    """When a call ends, every STT and TTS stream it opened must be closed: a job process may serve many
    calls, so one left open would accumulate. The line is read by `benchmarks.load --livekit`
    (`leaked_streams`, and the CPU voice's seconds for this call, counted from `voice_cpu_s`, as the
    `voice` part of its CPU); a leak is a warning."""
    try:
        await session.aclose()  # idempotent: the framework may have closed it already
    except Exception as e:  # the audit must never fail a shutdown
        log.debug("session close before the stream audit failed: %s", e)
    counts = open_streams(comp)
    level = logging.WARNING if any(counts.values()) else logging.INFO
    voice = round(float(getattr(comp.tts, "cpu_s", 0.0)) - voice_cpu_s, 3)
    log.log(level, "call ended", extra={**counts, "voice_cpu_s": voice})


async def _hand_back_memory() -> None:
    """When a call ends, give the allocator's free pages back (a job process may serve many calls)."""
    await asyncio.to_thread(release_free_memory)
