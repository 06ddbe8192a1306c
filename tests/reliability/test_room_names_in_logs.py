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
