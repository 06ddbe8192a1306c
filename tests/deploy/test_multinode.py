"""Scale-out on LiveKit's own cluster, for real, on this machine.

Two livekit-server nodes (10.77.0.1 and 10.77.0.2) share one Redis, inside a sealed network namespace the
test creates (tests/e2e/harness.py: lo + a veth pair, no route out). Two Parley worker hosts (separate
`python worker.py start` processes with the CPU voice and one shared embedded LLM) register, host-a through
node A and host-b through node B. Callers join rooms through both nodes with the agent dispatched in their
token. The load each host reports is set by the test (tests/deploy/mn_host.py says why).

Checked: every call gets exactly one agent, which publishes its voice track; calls spread over both
hosts; while host-a reports full, new calls go to host-b; after SIGTERM host-a drains (its calls keep
their agent, new calls land on host-b) and exits once its last call has ended. The distribution and drain
times are printed and recorded as figures.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.conftest import record_figure
from tests.e2e.harness import (
    API_KEY,
    API_SECRET,
    PYTHON,
    REPO,
    ComponentMissing,
    E2EStack,
    ManagedProcess,
    StackOptions,
    find_binary,
    missing_reason,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REDIS_PORT = 6391
LLM_PORT = 18091
HOST_READY_S = 240.0
AGENT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Node:
    name: str
    ip: str
    rtc_tcp: int
    rtc_udp: int

    @property
    def url(self) -> str:
        return f"ws://{self.ip}:7880"


def node_config(node: Node) -> str:
    return f"""\
port: 7880
bind_addresses: ["{node.ip}"]
rtc:
  tcp_port: {node.rtc_tcp}
  udp_port: {node.rtc_udp}
  node_ip: {node.ip}
  use_external_ip: false
  stun_servers: ["{node.ip}:3478"]
  enable_loopback_candidate: false
redis:
  address: 127.0.0.1:{REDIS_PORT}
keys:
  {API_KEY}: {API_SECRET}
room:
  empty_timeout: 10
  departure_timeout: 2
agents:
  # the busy 2-core CI box reports high CPU load; keep nodes offering jobs to any available worker
  target_load: 1.0
logging:
  level: info
"""


@dataclass
class Caller:
    room: str
    node: Node
    proc: ManagedProcess
    host: str | None = None
    events: list[dict] = field(default_factory=list)

    def read_events(self) -> list[dict]:
        self.events = []
        decoder = json.JSONDecoder()
        for line in self.proc.log_text().splitlines():
            if line.startswith("{"):
                # the caller's stdout and stderr share one log: LiveKit's native logger can write on the
                # same line right after an event, so read the event and ignore what follows it
                self.events.append(decoder.raw_decode(line)[0])
        return self.events

    def event(self, name: str) -> dict | None:
        return next((e for e in self.read_events() if e["event"] == name), None)


class Cluster:
    def __init__(self, stack: E2EStack) -> None:
        self.stack = stack
        self.nodes = {
            "A": Node("A", stack.ns.host_ip, 7881, 7882),
            "B": Node("B", stack.ns.peer_ip, 7891, 7892),
        }
        self.hosts: dict[str, ManagedProcess] = {}
        self.callers: list[Caller] = []

    def start(self) -> None:
        s = self.stack
        s.ns.create()
        s.ns.check_sealed()
        redis = s.spawn(
            "redis",
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(REDIS_PORT),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
        )
        s.wait_tcp(REDIS_PORT, redis)
        for node in self.nodes.values():
            cfg = s.opts.out_dir / f"livekit-{node.name}.yaml"
            cfg.write_text(node_config(node))
            proc = s.spawn(f"livekit-{node.name}", [str(find_binary("livekit-server")), "--config", str(cfg)])
            s.wait_tcp(7880, proc, host=node.ip)
        llm = s.spawn(
            "llm", [str(PYTHON), "-m", "worker.llm_server", "--port", str(LLM_PORT), "--parallel", "2"]
        )
        s.wait_log(llm, r"READY http", 120)
        started = {
            "host-a": self._spawn_host("host-a", self.nodes["A"]),
            "host-b": self._spawn_host("host-b", self.nodes["B"]),
        }
        for proc in started.values():
            s.wait_log(proc, r"registered worker", HOST_READY_S)
        self.hosts = started

    def load_file(self, host: str) -> Path:
        return self.stack.opts.out_dir / f"{host}.load"

    def set_load(self, host: str, load: float) -> None:
        """What the host reports to LiveKit (1.0 = its engine is full); waits until LiveKit was told."""
        proc = self.hosts[host]
        marker = "at full capacity" if load >= 0.8 else "below capacity"
        seen = proc.log_text().count(marker)
        self.load_file(host).write_text(f"{load}\n")
        deadline = time.monotonic() + 20
        while proc.log_text().count(marker) <= seen:
            assert time.monotonic() < deadline, f"{host} did not report load {load}\n{proc.log_tail()}"
            time.sleep(0.2)

    def _spawn_host(self, name: str, node: Node) -> ManagedProcess:
        self.load_file(name).write_text("0.0\n")
        env = self.stack.env(
            {
                "PARLEY_TEST_LOAD_FILE": str(self.load_file(name)),
                "LIVEKIT_URL": node.url,
                "PARLEY_LLM_BASE_URL": f"http://127.0.0.1:{LLM_PORT}/v1",
                "PARLEY_TTS_BACKEND": "cpu",
                "PARLEY_LOAD_THRESHOLD": "0.8",
                "PARLEY_LOG_LEVEL": "INFO",
                "PARLEY_LOG_ROOM_NAMES": "true",  # the test finds which host took a call by its room name
            }
        )
        return self.stack.spawn(
            name,
            [
                str(PYTHON),
                "-m",
                "tests.deploy.mn_host",
                "start",
                "--set=num_idle_processes=1",
                f"--set=phrase_cache_dir={self.stack.opts.out_dir / 'no-phrase-cache'}",
            ],
            env=env,
        )

    def call(self, room: str, node: Node) -> Caller:
        cmd = [
            str(PYTHON),
            "-m",
            "tests.deploy.mn_caller",
            "--url",
            node.url,
            "--room",
            room,
            "--api-key",
            API_KEY,
            "--api-secret",
            API_SECRET,
            "--agent-timeout",
            str(AGENT_TIMEOUT_S),
        ]
        caller = Caller(room, node, self.stack.spawn(f"caller-{room}", cmd))
        self.callers.append(caller)
        return caller

    def wait_agent(self, caller: Caller) -> str:
        """Wait until the agent joined the caller's room; return the host whose worker took the job."""
        deadline = time.monotonic() + AGENT_TIMEOUT_S + 10
        while time.monotonic() < deadline:
            if caller.event("agent"):
                break
            if caller.event("no_agent") or not caller.proc.alive():
                raise AssertionError(
                    f"{caller.room}: no agent joined\n{caller.proc.log_tail()}\n{self.tails()}"
                )
            time.sleep(0.3)
        else:
            raise AssertionError(f"{caller.room}: caller never reported an agent\n{self.tails()}")
        took = [name for name, proc in self.hosts.items() if self._took_job(proc, caller.room)]
        assert len(took) == 1, f"{caller.room}: job taken by {took}"
        caller.host = took[0]
        return caller.host

    @staticmethod
    def _took_job(proc: ManagedProcess, room: str) -> bool:
        return any(
            "received job request" in line and f'"{room}"' in line for line in proc.log_text().splitlines()
        )

    def hang_up(self, caller: Caller) -> float:
        caller.proc.popen.send_signal(signal.SIGTERM)
        caller.proc.popen.wait(30)
        assert caller.event("hung_up"), f"{caller.room}: hang-up failed\n{caller.proc.log_tail()}"
        return time.monotonic()

    def room_nodes(self) -> dict[str, str]:
        """Which livekit-server node hosted each room (from the nodes' own logs)."""
        where: dict[str, str] = {}
        for name in self.nodes:
            log = (self.stack.opts.out_dir / f"livekit-{name}.log").read_text(errors="replace")
            for line in log.splitlines():
                if "starting RTC session" in line:
                    for c in self.callers:
                        if f'"room": "{c.room}"' in line:
                            where[c.room] = name
        return where

    def tails(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.log_tail(8)}" for n, p in self.hosts.items())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    reason = missing_reason("netns", "livekit-server", "redis-server")
    if reason:
        pytest.skip(reason)
    if not (REPO / "worker.py").is_file():
        pytest.skip("worker.py not present")
    stack = E2EStack(StackOptions(out_dir=tmp_path, capture=False))
    c = Cluster(stack)
    try:
        c.start()
    except ComponentMissing as why:
        stack.close()
        pytest.skip(str(why))
    except BaseException:
        stack.close()
        raise
    try:
        yield c
    finally:
        for caller in c.callers:
            if caller.proc.alive():
                caller.proc.popen.send_signal(signal.SIGTERM)
        stack.close()


def test_calls_spread_skip_a_full_host_and_drain_on_stop(cluster: Cluster) -> None:
    nodes = [cluster.nodes["A"], cluster.nodes["B"]]

    def place(room: str, i: int) -> str:
        return cluster.wait_agent(cluster.call(room, nodes[i % 2]))

    # 1. Calls through both nodes, one after another; LiveKit picks a host at random weighted by free
    #    capacity, so keep placing until both hosts carry calls (P(12 in a row on one host) = 1/2048).
    hosts = [place(f"mn-{i:02d}-x", i) for i in range(4)]
    while len(set(hosts)) < 2 and len(hosts) < 12:
        hosts.append(place(f"mn-{len(hosts):02d}-x", len(hosts)))
    spread = {h: hosts.count(h) for h in cluster.hosts}
    assert spread["host-a"] >= 1 and spread["host-b"] >= 1, spread

    # 2. host-a reports full (what a full engine makes it report): new calls go to host-b only.
    cluster.set_load("host-a", 1.0)
    while_full = [place(f"mn-full-{i}-x", i) for i in range(3)]
    assert while_full == ["host-b"] * 3, while_full
    cluster.set_load("host-a", 0.0)

    # 3. Stop host-a (SIGTERM to the worker process, as Kubernetes does): it drains.
    on_a = [c for c in cluster.callers if c.host == "host-a"]
    host_a = cluster.hosts["host-a"]
    t_stop = time.monotonic()
    host_a.popen.send_signal(signal.SIGTERM)
    cluster.stack.wait_log(host_a, r"draining worker", 30)
    after_stop = [place(f"mn-drain-{i}-x", i) for i in range(2)]
    assert after_stop == ["host-b", "host-b"], after_stop
    time.sleep(2.0)
    assert host_a.alive(), "host-a exited while its calls were still running"
    for c in on_a:
        assert not c.event("agent_left"), f"{c.room}: the agent left a call on the draining host"

    # 4. Its calls end; then it exits on its own, cleanly.
    t_last = max(cluster.hang_up(c) for c in on_a)
    try:
        host_a.popen.wait(60)
    except subprocess.TimeoutExpired:
        # a flake seen once in three suite runs and never alone: keep what the host was doing
        raise AssertionError(
            f"host-a still running 60 s after its last call ended\n{host_a.log_tail(60)}"
        ) from None
    t_exit = time.monotonic()
    for c in cluster.callers:
        if c.proc.alive():
            cluster.hang_up(c)
    early = [c.room for c in cluster.callers if c.event("agent_left")]
    assert not early, f"agents left calls before hang-up: {early}"
    mute = [c.room for c in cluster.callers if not c.event("agent_audio")]
    assert not mute, f"the agent never published its voice in: {mute}"  # a real session ran on the host

    host_node = {"host-a": "A", "host-b": "B"}
    room_node = cluster.room_nodes()
    figures = {
        "calls": len(cluster.callers),
        "rooms_per_node": {n: list(room_node.values()).count(n) for n in cluster.nodes},
        "jobs_across_nodes": sum(
            1 for c in cluster.callers if room_node.get(c.room) != host_node[c.host or ""]
        ),
        "calls_spread": spread,
        "calls_while_host_a_full": {h: while_full.count(h) for h in cluster.hosts},
        "calls_after_host_a_stop": {h: after_stop.count(h) for h in cluster.hosts},
        "calls_on_host_a_at_stop": len(on_a),
        "drain_total_s": round(t_exit - t_stop, 2),
        "exit_after_last_call_s": round(t_exit - t_last, 2),
        "host_a_exit_code": host_a.popen.returncode,
    }
    print(json.dumps(figures), file=sys.stderr)
    (cluster.stack.opts.out_dir / "multinode.json").write_text(json.dumps(figures, indent=1))
    record_figure("multinode", figures)
    assert host_a.popen.returncode == 0, host_a.log_tail(20)
