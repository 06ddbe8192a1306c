"""Publishes each turn's latency to the room, so the caller's page can show where the time went.

One reliable data message per agent reply on topic `parley.metrics`, JSON:
`{"turn": n, "e2e_ms": …, "stt_final_ms": …, "end_of_turn_ms": …, "llm_ttft_ms": …, "tts_ttfb_ms": …,
"interrupted": bool}` plus `v2v_ms` when the worker measured voice-to-voice on its own audio output.
Turn 0 is the greeting. Values are the framework's per-message metrics (agent-side; `e2e_ms` is LiveKit's
`e2e_latency`, which stops at the first — possibly silent — frame, see DESIGN §8).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from livekit import rtc

log = logging.getLogger("parley.room_metrics")

METRICS_TOPIC = "parley.metrics"


@dataclass(frozen=True)
class RoomMetricsOptions:
    topic: str = METRICS_TOPIC
    enabled: bool = True


@dataclass(frozen=True)
class TurnLatency:
    turn: int
    e2e_ms: float | None = None
    stt_final_ms: float | None = None
    end_of_turn_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    v2v_ms: float | None = None
    interrupted: bool = False

    def to_json(self) -> bytes:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}).encode()


def _ms(report: Any, key: str) -> float | None:
    value = report.get(key) if report else None
    return round(float(value) * 1000, 1) if isinstance(value, int | float) else None


def turn_latency(
    turn: int, user_msg: Any | None, assistant_msg: Any, v2v_ms: float | None = None
) -> TurnLatency:
    """Combine the user message's metrics (STT, end of turn) with the reply's (LLM, TTS, e2e)."""
    user = getattr(user_msg, "metrics", None) or {}
    reply = getattr(assistant_msg, "metrics", None) or {}
    return TurnLatency(
        turn=turn,
        e2e_ms=_ms(reply, "e2e_latency"),
        stt_final_ms=_ms(user, "transcription_delay"),
        end_of_turn_ms=_ms(user, "end_of_turn_delay"),
        llm_ttft_ms=_ms(reply, "llm_node_ttft"),
        tts_ttfb_ms=_ms(reply, "tts_node_ttfb"),
        v2v_ms=v2v_ms,
        interrupted=bool(getattr(assistant_msg, "interrupted", False)),
    )


class RoomMetricsPublisher:
    """Watches an AgentSession's conversation and sends one latency message per reply to the room."""

    def __init__(self, room: rtc.Room, options: RoomMetricsOptions | None = None) -> None:
        self._room = room
        self.options = options or RoomMetricsOptions()
        self._turn = 0
        self._greeted = False
        self._last_user: Any | None = None
        self._pending_v2v: float | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.published: list[TurnLatency] = []

    def attach(self, session: Any) -> None:
        """Subscribe to `conversation_item_added` on an AgentSession."""
        session.on("conversation_item_added", self._on_item)

    def note_v2v(self, v2v_ms: float) -> None:
        """The worker's own voice-to-voice for the reply being played (attached to the next message)."""
        self._pending_v2v = v2v_ms

    def _on_item(self, ev: Any) -> None:
        item = getattr(ev, "item", None)
        role = getattr(item, "role", None)
        if role == "user":
            self._last_user = item
        elif role == "assistant":
            if self._last_user is None and not self._greeted:
                turn = 0
            else:
                self._turn += 1
                turn = self._turn
            self._greeted = True
            latency = turn_latency(turn, self._last_user, item, self._pending_v2v)
            self._last_user, self._pending_v2v = None, None
            self.publish(latency)

    def publish(self, latency: TurnLatency) -> None:
        """Send one turn's figures (fire and forget; a closed room just drops it)."""
        if not self.options.enabled:
            return
        self.published.append(latency)
        task = asyncio.create_task(self._send(latency))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, latency: TurnLatency) -> None:
        if not self._room.isconnected():
            return
        try:
            await self._room.local_participant.publish_data(
                latency.to_json(), reliable=True, topic=self.options.topic
            )
        except Exception as err:
            log.warning("could not publish turn latency: %s", err)

    async def aclose(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)
