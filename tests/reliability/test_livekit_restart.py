"""livekit-server restarts under a running worker: the worker registers again and takes the next call."""

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

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _count(proc_log: str, pattern: str) -> int:
    return len(re.findall(pattern, proc_log))


DISPATCH = """
import asyncio, sys
from livekit import api

async def main():
    async with api.LiveKitAPI(sys.argv[1], sys.argv[3], sys.argv[4]) as lk:
        req = api.CreateAgentDispatchRequest(agent_name="parley", room=sys.argv[2])
        await lk.agent_dispatch.create_dispatch(req)

asyncio.run(main())
"""


def test_worker_reregisters_and_takes_calls_after_a_server_restart(tmp_path: Path) -> None:
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
            [sys.executable, "-c", DISPATCH, stack.livekit_url, "after-restart", API_KEY, API_SECRET],
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-500:]
        deadline = time.monotonic() + 60
        while _count(worker.log_text(), r"received job request") < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _count(worker.log_text(), r"received job request") >= 1, worker.log_tail()
