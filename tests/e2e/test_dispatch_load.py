"""The load a Parley host reports gets it PARLEY_MAX_CALLS calls from a livekit-server at its defaults.

livekit-server sends no job to a worker whose reported load is at or above its `agents.target_load` (0.7
unless configured), whatever threshold the worker itself uses. Reporting calls / max_calls as is made a
host with room for 4 calls refuse its 4th (3 / 4 = 0.75). Here a real livekit-server (default agents
settings, loopback) offers a room to a real AgentServer whose load function is Parley's `compute_load`
over a host holding `active` calls; the job request reaching the worker is what counts.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.e2e.harness import API_KEY, API_SECRET, _which, missing_reason
from worker.server import compute_load
from worker.settings import get_settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AGENT = "dispatch-probe"


def _config(port: int, rtc_tcp: int, rtc_udp: int) -> str:
    return f"""\
port: {port}
bind_addresses: ["127.0.0.1"]
rtc:
  tcp_port: {rtc_tcp}
  udp_port: {rtc_udp}
  node_ip: 127.0.0.1
  use_external_ip: false
keys:
  {API_KEY}: {API_SECRET}
logging:
  level: info
"""


@pytest.fixture(scope="module")
def livekit_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    reason = missing_reason("livekit-server")
    if reason:
        pytest.skip(reason)
    from benchmarks.livekit_stack import free_ports

    port, rtc_tcp = free_ports(2)
    (rtc_udp,) = free_ports(1, kind=socket.SOCK_DGRAM)
    folder: Path = tmp_path_factory.mktemp("dispatch")
    cfg = folder / "livekit.yaml"
    cfg.write_text(_config(port, rtc_tcp, rtc_udp))
    log = (folder / "livekit-server.log").open("wb")
    proc = subprocess.Popen(
        [str(_which("livekit-server")), "--config", str(cfg)], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "livekit-server did not start"
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


async def _offered(url: str, active: int, wait_s: float) -> bool:
    """Whether a room with the agent dispatched reaches a worker that holds `active` calls."""
    from livekit import api
    from livekit.agents import AgentServer, JobContext, JobRequest

    host = SimpleNamespace(active_jobs=[object()] * active)
    requests: list[str] = []

    async def on_request(req: JobRequest) -> None:
        requests.append(req.room.name)
        await req.reject()

    async def entry(ctx: JobContext) -> None:  # never reached: every request is rejected
        raise AssertionError("no job should start")

    server = AgentServer(
        load_fnc=lambda _s: compute_load(host),  # type: ignore[arg-type]
        load_threshold=get_settings().livekit_target_load,
        ws_url=url.replace("http", "ws"),
        api_key=API_KEY,
        api_secret=API_SECRET,
        num_idle_processes=0,
        port=0,
    )
    server.rtc_session(entry, agent_name=AGENT, on_request=on_request)
    run = asyncio.create_task(server.run(devmode=False))
    try:
        await asyncio.sleep(4.0)  # registered, and its load reported (every 2.5 s)
        room = f"probe-{active}-{time.monotonic_ns()}"
        async with api.LiveKitAPI(url, API_KEY, API_SECRET) as lk:
            await lk.room.create_room(
                api.CreateRoomRequest(name=room, agents=[api.RoomAgentDispatch(agent_name=AGENT)])
            )
            deadline = time.monotonic() + wait_s
            while room not in requests and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await lk.room.delete_room(api.DeleteRoomRequest(room=room))
        return room in requests
    finally:
        await server.aclose()
        run.cancel()


def test_a_host_is_offered_calls_until_it_holds_max_calls(
    livekit_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_MAX_CALLS", "4")
    get_settings.cache_clear()
    try:
        assert compute_load(SimpleNamespace(active_jobs=[1, 2, 3])) < 0.7  # type: ignore[arg-type]
        assert asyncio.run(_offered(livekit_url, active=3, wait_s=8.0)), (
            "a host with 3 of 4 calls got no call"
        )
        assert not asyncio.run(_offered(livekit_url, active=4, wait_s=5.0)), "a full host was offered a call"
    finally:
        get_settings.cache_clear()
