"""Access tokens for the call page: one room, a short expiry, and the agent dispatched with the token.

Putting the dispatch in the token (RoomConfiguration.agents) means the room is created with the agent
already requested, so the caller never waits for a separate dispatch call.
"""

from __future__ import annotations

import datetime
import re
import secrets
from dataclasses import dataclass

from livekit import api

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class TokenRequestError(ValueError):
    """A request the endpoint refuses; the message is one line meant for the caller."""


@dataclass(frozen=True)
class TokenOptions:
    api_key: str
    api_secret: str
    agent_name: str = "parley"  # empty = no agent dispatched with the token
    agent_metadata: str = ""  # the dispatched job's metadata (trusted callers only: tests, outbound calls)
    # Long enough to connect; LiveKit refreshes the token of a connected participant itself.
    ttl_s: int = 120
    room_prefix: str = "parley-"


@dataclass(frozen=True)
class CallToken:
    room: str
    identity: str
    token: str


def _checked(kind: str, value: str | None, default: str) -> str:
    if value is None or value == "":
        return default
    if not _NAME.match(value):
        raise TokenRequestError(f"{kind} must be 1-64 characters of letters, digits, '_', '-' or '.'")
    return value


def issue_call_token(opts: TokenOptions, room: str | None = None, identity: str | None = None) -> CallToken:
    """A JWT that lets one caller join one room with the agent dispatched: publish the microphone and
    subscribe, nothing else (no data, no other sources, no metadata, no admin).

    `room`/`identity` are for trusted callers that hold the API secret anyway (benchmarks, tests); the
    page's endpoint never passes them, so a browser always gets a fresh `parley-` room and identity.
    """
    room_name = _checked("room", room, opts.room_prefix + secrets.token_hex(8))
    ident = _checked("identity", identity, "caller-" + secrets.token_hex(6))
    grants = api.VideoGrants(
        room_join=True,
        room=room_name,
        can_publish=True,
        can_publish_sources=["microphone"],
        can_subscribe=True,
        can_publish_data=False,
        can_update_own_metadata=False,
    )
    token = (
        api.AccessToken(opts.api_key, opts.api_secret)
        .with_identity(ident)
        .with_name(ident)
        .with_grants(grants)
        .with_ttl(datetime.timedelta(seconds=opts.ttl_s))
    )
    if opts.agent_name:
        token.with_room_config(
            api.RoomConfiguration(
                agents=[api.RoomAgentDispatch(agent_name=opts.agent_name, metadata=opts.agent_metadata)]
            )
        )
    jwt = token.to_jwt()
    return CallToken(room=room_name, identity=ident, token=jwt)
