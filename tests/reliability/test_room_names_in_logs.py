"""A SIP caller's number, which LiveKit SIP writes into the room name and the identity, stays out of the logs.

The filter alone (every record shape LiveKit Agents and Parley log) here; the real thing, a real worker under
a real livekit-server taking a call in a SIP-style room from a SIP-style identity with its log grepped, is
the call after the server restart in test_livekit_restart.py (one stack for both).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

from worker.log_privacy import RoomNameFilter, label

NUMBER = "15551234567"
ROOM = f"_+{NUMBER}_Xk3p"
IDENTITY = f"sip_+{NUMBER}"


def record(msg: str, args: tuple[object, ...] | None = None, **extra: object) -> logging.LogRecord:
    return logging.getLogger("test.privacy").makeRecord(
        "x", logging.INFO, "f", 1, msg, args, None, extra=extra
    )


def test_filter_hashes_room_names_identities_and_jobs_in_every_record_shape() -> None:
    f = RoomNameFilter()
    job = SimpleNamespace(job=SimpleNamespace(id="AJ_1", room=ROOM))
    records = [
        record("call started", room=ROOM),
        record("joined", identity=IDENTITY),
        record("received job request", job_request=job),
        record("assigned", job={"id": "AJ_2", "room": {"name": ROOM}}),
        record(
            "linked", **{"lk.pii.participant_identity": IDENTITY, "lk.pii.arguments": f'{{"to": "{NUMBER}"}}'}
        ),
        record("room %s closed", (ROOM,)),
        record(f"dialled +{NUMBER} done"),
    ]
    for r in records:
        assert f.filter(r)
    text = " ".join(f"{r.getMessage()} {r.__dict__}" for r in records)
    assert NUMBER not in text
    fields = [r.__dict__ for r in records]
    assert fields[0]["room"] == label(ROOM) and fields[0]["room"].startswith("#")
    assert fields[1]["identity"].startswith("sip_#")
    assert fields[2]["job_request"] == {"id": "AJ_1"} and fields[3]["job"] == {"id": "AJ_2"}
    assert fields[4]["lk.pii.participant_identity"] == label(IDENTITY)
    assert fields[4]["lk.pii.arguments"] == "<withheld>"
    assert records[5].getMessage() == f"room {label(ROOM)} closed"  # a name seen before, in the text too
    assert label("parley-3fa9c2").startswith("parley-#") and label(ROOM) == label(ROOM)


def test_bare_numbers_and_sip_uris_are_scrubbed_but_not_decimals() -> None:
    f = RoomNameFilter()
    lines = [
        record(f"INVITE sip:{NUMBER}@pbx.example failed"),
        record("caller %s hung up", ("5551234567",)),
        record(f"transfer to tel:{NUMBER}."),
    ]
    for r in lines:
        assert f.filter(r)
        assert NUMBER not in r.getMessage() and "5551234567" not in r.getMessage()
    assert lines[0].getMessage() == "INVITE sip:#@pbx.example failed"
    kept = record("decode took 0.12345678 s, 512 samples, port 7880")
    f.filter(kept)
    assert kept.getMessage() == "decode took 0.12345678 s, 512 samples, port 7880"


def test_a_traceback_is_scrubbed_of_numbers_and_names() -> None:
    f = RoomNameFilter()
    f.filter(record("call started", room=ROOM))
    try:
        raise RuntimeError(f"dial sip:{NUMBER}@pbx failed in room {ROOM}")
    except RuntimeError:
        import sys

        r = logging.getLogger("test.privacy").makeRecord(
            "x", logging.ERROR, "f", 1, "dial failed", None, sys.exc_info()
        )
    assert f.filter(r)
    out = logging.Formatter("%(message)s").format(r)
    assert "Traceback" in out and "RuntimeError" in out
    assert NUMBER not in out and ROOM not in out and label(ROOM) in out
    # a job process's record arrives here with its traceback already formatted: scrubbed too
    forwarded = record("job failed")
    forwarded.exc_text = f"Traceback ...\nValueError: bad number {NUMBER}"
    f.filter(forwarded)
    assert NUMBER not in logging.Formatter().format(forwarded)


def test_names_are_scrubbed_from_text_after_many_thousands_of_calls() -> None:
    f = RoomNameFilter()
    rooms = [f"parley-{i:05x}q" for i in range(10_000)]  # more than any fixed list of recent names
    for room in rooms:
        f.filter(record("call started", room=room))
    for room in (rooms[0], rooms[5000], rooms[-1]):
        r = record(f"room {room} closed")
        f.filter(r)
        assert r.getMessage() == f"room {label(room)} closed"
    other = record("room parley-unseen closed")
    f.filter(other)
    assert other.getMessage() == "room parley-unseen closed"


def test_a_label_whose_digest_is_mostly_digits_is_not_scrubbed_as_a_number() -> None:
    """A label such as `#7587469f` holds a run of 7 digits; it is the scrubber's own output, not a number."""
    from worker.log_privacy import _PHONE

    for label_ in ("parley-#7587469f", "parley-#a7587469", "#12345678"):
        assert _PHONE.sub("#", f"room {label_} closed") == f"room {label_} closed"
    assert _PHONE.sub("#", "caller 5551234567 via sip:15551234567@pbx") == "caller # via sip:#@pbx"
