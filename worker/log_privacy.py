"""Room names and participant identities never reach the logs as they are.

LiveKit SIP names a caller's room and identity after the caller's number (`_+15551234567_x7Kp`,
`sip_+15551234567`), and LiveKit Agents logs the room name of every job at INFO ("received job request",
"initializing job runner", ...) and more under `lk.pii.*` keys. A filter on the worker's log handlers
replaces each such value with its dispatch prefix (the letters up to the first `-` or `_`) and a short keyed
hash: lines of one call still correlate, the number is gone. `PARLEY_LOG_ROOM_NAMES=true` turns it off.

The filter sits on the handlers (not the loggers) because the job processes' records are re-emitted in the
main process straight to its handlers, past any logger filter.

The message text, a traceback and a stack are scrubbed too: a name seen in a field is replaced wherever it
appears (the last 4 096 as text, any token of every name ever seen through a fixed 1 MiB set of hashes, so
memory stays bounded and scrubbing never stops), and so is any run of 7 or more digits (`+15551234567`,
`sip:15551234567@pbx`, `caller 5551234567`) that is not the fraction of a decimal number (issue 66).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections import OrderedDict
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
# 7+ digits, not a decimal's fraction, nor inside a label this scrubber wrote (`#7587469f`: a run of 7 there
# starts right after the `#` or one hex letter later)
_PHONE = re.compile(r"(?<![\d.])(?<!#)(?<!#[a-f])\+?\d{7,}(?!\d|\.\d)")
_TOKEN = re.compile(r"[^\s'\"(){}\[\],;=<>:/]+")  # how a name sits in a message: between these
_KEY = secrets.token_bytes(16)  # per process: hashes correlate lines of one run, not across runs
RECENT_NAMES = 4096


class _NameHashes:
    """Every name seen, as bits of a fixed 1 MiB Bloom filter: a false match only over-scrubs a token."""

    BITS = 8 * 1024 * 1024

    def __init__(self) -> None:
        self._bits = bytearray(self.BITS // 8)

    def _positions(self, value: str) -> list[int]:
        d = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), key=_KEY, digest_size=12).digest()
        return [int.from_bytes(d[i : i + 4], "little") % self.BITS for i in (0, 4, 8)]

    def add(self, value: str) -> None:
        for p in self._positions(value):
            self._bits[p >> 3] |= 1 << (p & 7)

    def __contains__(self, value: str) -> bool:
        return all(self._bits[p >> 3] & (1 << (p & 7)) for p in self._positions(value))


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
        self._seen: OrderedDict[str, str] = OrderedDict()  # recent raw name -> label, replaced as text
        self._all = _NameHashes()  # every name: its tokens replaced in any later text

    def _label(self, value: str) -> str:
        out = self._seen.get(value)
        if out is None:
            out = label(value)
            self._seen[value] = out
            if len(self._seen) > RECENT_NAMES:
                self._seen.popitem(last=False)
            if value:
                self._all.add(value)
        else:
            self._seen.move_to_end(value)
        return out

    def scrub(self, text: str) -> str:
        """A message, traceback or stack with every name seen and every long number replaced."""
        for raw, lab in self._seen.items():
            if raw and raw in text:
                text = text.replace(raw, lab)
        if self._seen:
            text = _TOKEN.sub(lambda m: label(m.group(0)) if m.group(0) in self._all else m.group(0), text)
        return _PHONE.sub("#", text)

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
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:  # its own, or one a job process formatted before sending the record here
            record.exc_text, record.exc_info = self.scrub(record.exc_text), None
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)
        if record.args or self._seen or _PHONE.search(str(record.msg)):
            try:
                text = record.getMessage()
            except (TypeError, ValueError):
                return True  # a malformed call: logging reports it as it would without the filter
            record.msg, record.args = self.scrub(text), None
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
