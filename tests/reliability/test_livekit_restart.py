"""livekit-server restarts under a running worker: the worker registers again and takes the next call.

That call comes as a phone call does through LiveKit SIP: the caller's number in the room name and the
identity. The worker's log must hold neither (test_room_names_in_logs.py checks the filter alone); one
stack serves both checks, as each costs a server and a worker start.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from simulator.livekit_stack import (
    API_KEY,
    API_SECRET,
    E2EStack,
    StackOptions,
    find_binary,
    free_ports,
    missing_reason,
    netns_available,
)
from worker.log_privacy import label

from .test_room_names_in_logs import IDENTITY, NUMBER, ROOM

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _count(proc_log: str, pattern: str) -> int:
    return len(re.findall(pattern, proc_log))


# dispatch the agent to the room, then join it as the caller for argv[6] seconds
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


def test_worker_reregisters_after_a_server_restart_and_logs_no_caller_number(tmp_path: Path) -> None:
    reason = missing_reason("livekit-server")
    if reason:
        pytest.skip(reason)
    ports = free_ports(2)
    opts = StackOptions(
        out_dir=tmp_path,
        isolation="netns" if netns_available() else "loopback",
        with_worker=True,
        capture=False,
        livekit_port=ports[0],
        rtc_tcp_port=ports[1],
        rtc_udp_port=ports[1],
        worker_env={"PARLEY_LOG_LEVEL": "INFO"},
    )
    with E2EStack(opts) as stack:
        worker = next(p for p in stack.procs if p.name == "worker")
        server = next(p for p in stack.procs if p.name == "livekit-server")
        assert _count(worker.log_text(), r"registered worker") == 1
        server.stop()
        time.sleep(2.0)  # the worker notices and starts retrying
        restarted = stack.spawn(
            "livekit-server", [str(find_binary("livekit-server")), "--config", str(tmp_path / "livekit.yaml")]
        )
        stack.wait_tcp(opts.livekit_port, restarted)
        deadline = time.monotonic() + 60
        while _count(worker.log_text(), r"registered worker") < 2 and time.monotonic() < deadline:
            assert worker.alive(), worker.log_tail()
            time.sleep(0.5)
        assert _count(worker.log_text(), r"registered worker") >= 2, worker.log_tail()
        done = stack.run_in_ns(
            [sys.executable, "-c", JOIN, stack.livekit_url, ROOM, IDENTITY, API_KEY, API_SECRET, "8"],
            timeout=90,
        )
        assert done.returncode == 0, done.stderr[-800:]
        deadline = time.monotonic() + 20
        while "call started" not in worker.log_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        log = worker.log_text()
    assert "received job request" in log and "call started" in log, log[-3000:]
    assert label(ROOM).split("#")[0] + "#" in log  # the room's label is there...
    leaked = [line for line in log.splitlines() if NUMBER in line][:5]
    assert not leaked, leaked  # ...the caller's number is not
