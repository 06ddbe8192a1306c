"""The load a Parley host reports gets it PARLEY_MAX_CALLS calls from a livekit-server at its defaults.

livekit-server sends no job to a worker whose reported load is at or above its `agents.target_load` (0.7
unless configured), whatever threshold the worker itself uses. Reporting calls / max_calls as is made a
host with room for 4 calls refuse its 4th (3 / 4 = 0.75). Here a real livekit-server (default agents
settings, loopback) offers a room to a real AgentServer whose load function is Parley's `compute_load`
over a host holding `active` calls; the job request reaching the worker is what counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from tests.e2e.harness import API_KEY, API_SECRET, ComponentMissing, E2EStack, StackOptions
from worker.load import compute_load
from worker.settings import get_settings, use_settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AGENT = "dispatch-probe"


@pytest.fixture(scope="module")
def livekit_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The project's stack with livekit-server alone, on loopback, its agents settings left at defaults."""
    stack = E2EStack(StackOptions(out_dir=tmp_path_factory.mktemp("dispatch"), isolation="loopback"))
    try:
        stack.start()
    except ComponentMissing as why:  # livekit-server not installed here: its one-line reason
        stack.close()
        pytest.skip(str(why))
    try:
        yield stack.livekit_url.replace("ws://", "http://")
    finally:
        stack.close()


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
    use_settings(None)
    try:
        assert compute_load(SimpleNamespace(active_jobs=[1, 2, 3])) < 0.7  # type: ignore[arg-type]
        assert asyncio.run(_offered(livekit_url, active=3, wait_s=8.0)), (
            "a host with 3 of 4 calls got no call"
        )
        assert not asyncio.run(_offered(livekit_url, active=4, wait_s=5.0)), "a full host was offered a call"
    finally:
        use_settings(None)
