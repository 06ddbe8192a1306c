"""Room names and participant identities never reach the logs as they are.

LiveKit SIP names a caller's room and identity after the caller's number (`_+15551234567_x7Kp`,
`sip_+15551234567`), and LiveKit Agents logs the room name of every job at INFO ("received job request",
"initializing job runner", ...) and more under `lk.pii.*` keys. A filter on the worker's log handlers
replaces each such value with its dispatch prefix (the letters up to the first `-` or `_`) and a short keyed
hash: lines of one call still correlate, the number is gone. `PARLEY_LOG_ROOM_NAMES=true` turns it off.

The filter sits on the handlers (not the loggers) because the job processes' records are re-emitted in the
main process straight to its handlers, past any logger filter.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Mapping
from typing import Any

# record attributes (LiveKit's and Parley's `extra` keys) that hold a room name or an identity
NAME_KEYS = frozenset(
    {
        "room",
        "room_name",
        "identity",
        "participant",
        "participant_identity",
        "caller",
        "human_agent_room_name",
    }
)
PII_PREFIX = "lk.pii."  # LiveKit Agents puts personal data into `extra` keys with this prefix
# record attributes that hold a whole job (its room, participant and metadata): only the job id is kept
JOB_KEYS = frozenset({"job", "job_request"})
_PREFIX = re.compile(r"^[A-Za-z]+[-_]")  # the dispatch prefix: `parley-`, `call-`, `sip_`
_PHONE = re.compile(r"(?:\+|(?<=_))\d{7,15}")  # a number as SIP writes it into names: +1555..., _1555...
_KEY = secrets.token_bytes(16)  # per process: hashes correlate lines of one run, not across runs


def label(name: str) -> str:
    """`parley-3fa9c2` -> `parley-#1a2b3c4d`, `_+15551234567_x7Kp` -> `#5e6f7a8b`; one name, one label."""
    if not name:
        return name
    m = _PREFIX.match(name)
    prefix = m.group(0) if m else ""
    digest = hmac.new(_KEY, name.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:8]
    return f"{prefix}#{digest}"


def _job_id(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("id", "?"))
    job = getattr(value, "job", value)
    return str(getattr(job, "id", "?"))


class RoomNameFilter(logging.Filter):
    """Rewrites room names and identities on every record it sees (returns True: it never drops one)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, str] = {}  # raw name -> label, to scrub names a message text repeats

    def _label(self, value: str) -> str:
        out = self._seen.get(value)
        if out is None:
            out = label(value)
            if len(self._seen) < 4096:
                self._seen[value] = out
        return out

    def filter(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        for key in NAME_KEYS & fields.keys():
            if isinstance(fields[key], str):
                fields[key] = self._label(fields[key])
        for key in JOB_KEYS & fields.keys():
            fields[key] = {"id": _job_id(fields[key])}
        for key in [k for k in fields if k.startswith(PII_PREFIX)]:
            # LiveKit marks what it knows to be personal: names get a label, the rest (tool arguments,
            # outputs, RPC payloads, ...) is withheld
            named = ("identity" in key or "room" in key) and isinstance(fields[key], str)
            fields[key] = self._label(fields[key]) if named else "<withheld>"
        if record.args or self._seen or _PHONE.search(str(record.msg)):
            try:
                text = record.getMessage()
            except (TypeError, ValueError):
                return True  # a malformed call: logging reports it as it would without the filter
            for raw, lab in self._seen.items():
                if raw and raw in text:
                    text = text.replace(raw, lab)
            record.msg, record.args = _PHONE.sub("#", text), None
        return True


_FILTER = RoomNameFilter()


def install(root: logging.Logger | None = None) -> RoomNameFilter:
    """Put the filter on every handler of the root logger (idempotent)."""
    for handler in (root or logging.getLogger()).handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
    return _FILTER


def install_with_livekit_logging() -> None:
    """Install now and again right after LiveKit's CLI sets up its own handler (it does so in run_app)."""
    from livekit.agents.cli import cli as lk_cli

    install()
    original = lk_cli.setup_logging
    if getattr(original, "_parley_private", False):
        return

    def setup_logging(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        install()

    setup_logging._parley_private = True  # type: ignore[attr-defined]
    lk_cli.setup_logging = setup_logging
