"""A SIP caller's number, which LiveKit SIP writes into the room name and the identity, stays out of the logs.

The filter alone (every record shape LiveKit Agents and Parley log), then the real thing: a real worker under
a real livekit-server takes a call in a SIP-style room from a SIP-style identity, and its log is grepped.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from simulator.livekit_stack import (
    API_KEY,
    API_SECRET,
    E2EStack,
    StackOptions,
    free_ports,
    missing_reason,
)
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


JOIN = """
import asyncio, sys
from livekit import api, rtc
from simulator.rtc_exit import exit_now

async def main():
    url, room, identity, key, secret = sys.argv[1:6]
    async with api.LiveKitAPI(url.replace("ws", "http"), key, secret) as lk:
        req = api.CreateAgentDispatchRequest(agent_name="parley", room=room)
        await lk.agent_dispatch.create_dispatch(req)
    token = (
        api.AccessToken(key, secret).with_identity(identity)
        .with_grants(api.VideoGrants(room_join=True, room=room)).to_jwt()
    )
    r = rtc.Room()
    await r.connect(url, token)
    await asyncio.sleep(float(sys.argv[6]))
    await r.disconnect()

asyncio.run(main())
exit_now(0)
"""


@pytest.mark.slow
@pytest.mark.e2e
def test_worker_log_holds_no_caller_number_from_a_sip_style_room(tmp_path: Path) -> None:
    reason = missing_reason("livekit-server")
    if reason:
        pytest.skip(reason)
    ports = free_ports(2)
    opts = StackOptions(
        out_dir=tmp_path,
        isolation="loopback",
        with_worker=True,
        capture=False,
        livekit_port=ports[0],
        rtc_tcp_port=ports[1],
        rtc_udp_port=ports[1],
        worker_env={"PARLEY_LOG_LEVEL": "INFO"},
    )
    with E2EStack(opts) as stack:
        worker = next(p for p in stack.procs if p.name == "worker")
        done = stack.run_in_ns(
            [sys.executable, "-c", JOIN, stack.livekit_url, ROOM, IDENTITY, API_KEY, API_SECRET, "12"],
            timeout=90,
        )
        assert done.returncode == 0, done.stderr[-800:]
        deadline = time.monotonic() + 20
        while "call started" not in worker.log_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        log = worker.log_text()
    assert "received job request" in log and "call started" in log, log[-3000:]
    assert label(ROOM).split("#")[0] + "#" in log  # the label is there...
    assert NUMBER not in log, [line for line in log.splitlines() if NUMBER in line][
        :5
    ]  # ...the number is not
