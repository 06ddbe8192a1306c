"""A real local LiveKit stack (livekit-server, optionally Redis, livekit-sip, the call page and the worker)
for real-room calls: `make demo`, `python -m benchmarks.call --livekit` and the end-to-end tests.

Two ways to keep it on this machine:
- `netns` (needs root): a network namespace holding only loopback and a veth pair whose two ends both stay
  inside it (10.77.0.1/.2), with no default route, so nothing the stack does can reach another host.
  livekit-server advertises only the veth address (rtc.node_ip, no external IP, no STUN) and a tshark
  capture on every interface of the namespace can be checked afterwards: every packet between our own
  addresses. The SIP phone (sipp) gets a namespace of its own, `<name>-phone` (10.78.0.2), joined to the
  stack's by a second veth pair and a route, like a real phone on another network: livekit-sip binds and
  announces the one stack address 10.77.0.1, and packets to the phone leave from it.
- `loopback` (any user): plain 127.0.0.1 on free ports, the server bound to and advertising only
  127.0.0.1 (no external IP, no STUN).
Clients are told to use no ICE servers in both.

Every process is started by this module (in its own session) and stopped by its id at teardown, even when
a call failed; then the namespace is deleted.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / "bin"
PYTHON = REPO / ".venv" / "bin" / "python"
WEB_DIR = REPO / "web"

API_KEY = "devkey"
API_SECRET = "secret-for-parley-e2e-tests-only-32b"


NO_PERSISTENCE = ("--save", "", "--appendonly", "no")
"""Redis keeps nothing on disk: the stack is thrown away after each run."""


class ComponentMissing(RuntimeError):
    """A part of the stack is not installed here; the message is the one-line skip reason."""


class StackError(RuntimeError):
    """The stack did not come up (the message says which part and where its log is)."""


# --- what is installed -------------------------------------------------------------------------------


def find_binary(name: str) -> str | None:
    local = BIN / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


_REQUIREMENTS: dict[str, tuple[str, str]] = {
    # component: (executable, how to get it)
    "livekit-server": (
        "livekit-server",
        "run `make setup` (scripts/setup_livekit.sh builds bin/livekit-server)",
    ),
    "livekit-sip": (
        "livekit-sip",
        "run `make setup` (scripts/setup_e2e.sh builds bin/livekit-sip v1.11.0 from the Go module proxy)",
    ),
    "redis-server": ("redis-server", "install the Debian package redis-server"),
    "sipp": ("sipp", "install the Debian package sip-tester"),
    "tshark": ("tshark", "install the Debian package tshark"),
    "chromium": ("chromium", "install the Debian package chromium"),
    "sox": ("sox", "install the Debian package sox"),
    "ip": ("ip", "install the Debian package iproute2"),
    "node": ("node", "install Node.js 20"),
}


def missing_reason(*components: str) -> str | None:
    """One line naming the first missing component and how to install it, or None when all are here."""
    for comp in components:
        if comp == "netns":
            reason = _netns_reason()
            if reason:
                return reason
            continue
        if comp == "web-page":
            if not (WEB_DIR / "dist" / "app.js").is_file() or not (WEB_DIR / "node_modules").is_dir():
                return "web call page not built: run `make setup` (cd web && npm ci && npm run build)"
            continue
        exe, how = _REQUIREMENTS[comp]
        if find_binary(exe) is None:
            recorded = BIN / f".{comp}.missing"  # the setup script's own one-line reason, when it left one
            if recorded.is_file() and recorded.read_text().strip():
                return recorded.read_text().strip().splitlines()[0]
            return f"{comp} not installed: {how}"
    return None


def livekit_server_problem(timeout_s: float = 15.0) -> str | None:
    """One line saying why livekit-server cannot be used here (missing, or does not run), else None."""
    missing = missing_reason("livekit-server")
    if missing:
        return missing
    exe = str(find_binary("livekit-server"))
    try:
        res = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{exe} does not run: {err}"
    if res.returncode != 0 or "version" not in res.stdout.lower():
        tail = (res.stderr or res.stdout).strip().splitlines()
        return f"{exe} --version failed: {tail[-1] if tail else f'exit code {res.returncode}'}"
    return None


def netns_available() -> bool:
    """True when this process may create network namespaces (root with iproute2)."""
    return _netns_reason() is None


def free_ports(count: int, kind: int = socket.SOCK_STREAM) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, kind)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_NETNS_OK: str | bool | None = False  # False = not probed yet


def _netns_reason() -> str | None:
    global _NETNS_OK
    if _NETNS_OK is not False:
        return _NETNS_OK  # type: ignore[return-value]
    if shutil.which("ip") is None:
        _NETNS_OK = "ip not installed: install the Debian package iproute2"
        return _NETNS_OK
    name = f"parley-probe-{os.getpid()}"
    res = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if res.returncode != 0:
        _NETNS_OK = f"cannot create a network namespace (needs root): {res.stderr.strip().splitlines()[-1]}"
        return _NETNS_OK
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    _NETNS_OK = None
    return None


# --- processes -----------------------------------------------------------------------------------------


@dataclass
class ManagedProcess:
    """One child process started in its own session, logging to a file; stopped by its own id."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 4.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        else:
            # the leader is gone; children in its process group may not be
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)


# --- the namespace -------------------------------------------------------------------------------------


def _in_ns(name: str, cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, timeout=30)


@dataclass
class Netns:
    """A network namespace with lo and a veth pair (both ends inside), no route anywhere else."""

    name: str
    host_ip: str = "10.77.0.1"
    peer_ip: str = "10.77.0.2"
    prefix: int = 24
    # the phone's own namespace, routed to the stack's: another host as far as livekit-sip can tell
    phone_ip: str = "10.78.0.2"
    phone_gw: str = "10.78.0.1"  # the stack namespace's end of the phone's link

    @property
    def phone_name(self) -> str:
        return f"{self.name}-phone"

    def create(self) -> None:
        reason = _netns_reason()
        if reason:
            raise ComponentMissing(reason)
        cmds = [
            ["ip", "netns", "add", self.name],
            ["ip", "-n", self.name, "link", "set", "lo", "up"],
            # no IPv6 on the veth pair: no link-local chatter (neighbour discovery, MLD) to account for
            ["ip", "netns", "exec", self.name, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            ["ip", "-n", self.name, "link", "add", "pe0", "type", "veth", "peer", "name", "pe1"],
            ["ip", "-n", self.name, "addr", "add", f"{self.host_ip}/{self.prefix}", "dev", "pe0"],
            ["ip", "-n", self.name, "addr", "add", f"{self.peer_ip}/{self.prefix}", "dev", "pe1"],
            ["ip", "-n", self.name, "link", "set", "pe0", "up"],
            ["ip", "-n", self.name, "link", "set", "pe1", "up"],
            *self._phone_cmds(),
        ]
        for cmd in cmds:
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                self.destroy()
                raise StackError(f"{' '.join(cmd)} failed: {res.stderr.strip()}")

    def _phone_cmds(self) -> list[list[str]]:
        phone, net = self.phone_name, f"{self.phone_gw.rsplit('.', 1)[0]}.0/{self.prefix}"
        return [
            ["ip", "netns", "add", phone],
            ["ip", "-n", phone, "link", "set", "lo", "up"],
            ["ip", "netns", "exec", phone, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            [
                "ip",
                "-n",
                self.name,
                "link",
                "add",
                "ph1",
                "type",
                "veth",
                "peer",
                "name",
                "ph0",
                "netns",
                phone,
            ],
            ["ip", "-n", self.name, "addr", "add", f"{self.phone_gw}/{self.prefix}", "dev", "ph1"],
            ["ip", "-n", phone, "addr", "add", f"{self.phone_ip}/{self.prefix}", "dev", "ph0"],
            ["ip", "-n", self.name, "link", "set", "ph1", "up"],
            ["ip", "-n", phone, "link", "set", "ph0", "up"],
            # the phone reaches the stack through its gateway, as it would across a real network ...
            ["ip", "-n", phone, "route", "add", f"{self.host_ip}/32", "via", self.phone_gw],
            # ... and the stack answers from the one address livekit-sip announces, never the link's own
            ["ip", "-n", self.name, "route", "replace", net, "dev", "ph1", "src", self.host_ip],
        ]

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *cmd]

    def wrap_phone(self, cmd: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.phone_name, *cmd]

    def run(self, cmd: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.wrap(cmd), capture_output=True, text=True, timeout=timeout)

    def own_addresses(self) -> set[str]:
        return {self.host_ip, self.peer_ip, self.phone_ip, self.phone_gw}

    def check_sealed(self) -> None:
        """Fail unless the namespaces hold only lo + our veth pairs and no default route."""
        for ns, expected in ((self.name, {"lo", "pe0", "pe1", "ph1"}), (self.phone_name, {"lo", "ph0"})):
            links = _in_ns(ns, ["ip", "-o", "link"]).stdout
            names = {re.split(r"[@:]", ln.split(": ", 2)[1])[0] for ln in links.splitlines() if ": " in ln}
            if names != expected:
                raise StackError(f"namespace {ns} has unexpected links: {sorted(names)}")
            for family in ("-4", "-6"):
                routes = _in_ns(ns, ["ip", family, "route", "show", "default"]).stdout.strip()
                if routes:
                    raise StackError(f"namespace {ns} has a default route: {routes}")

    def pids(self, name: str | None = None) -> list[int]:
        res = subprocess.run(["ip", "netns", "pids", name or self.name], capture_output=True, text=True)
        return [int(p) for p in res.stdout.split()]

    def destroy(self) -> None:
        # Every process left in the namespaces was started by this harness (the namespaces are ours).
        for ns in (self.phone_name, self.name):
            for pid in self.pids(ns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class HostLoopback:
    """The same interface as `Netns` for plain loopback on this host: nothing to create, commands run as
    they are. Used where namespaces are not allowed (not root); the server binds and advertises only
    127.0.0.1, so media never uses another interface."""

    host_ip = "127.0.0.1"
    peer_ip = "127.0.0.1"
    phone_ip = "127.0.0.1"
    prefix = 8

    def __init__(self, name: str) -> None:
        self.name = name

    def create(self) -> None:
        return None

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        return list(cmd)

    def wrap_phone(self, cmd: Sequence[str]) -> list[str]:
        return list(cmd)

    def run(self, cmd: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)

    def own_addresses(self) -> set[str]:
        return {self.host_ip}

    def check_sealed(self) -> None:
        return None

    def destroy(self) -> None:
        return None


# --- the stack ------------------------------------------------------------------------------------------


@dataclass
class StackOptions:
    out_dir: Path
    # netns: a sealed namespace (root only); loopback: 127.0.0.1 on free ports (capture is not possible)
    isolation: Literal["netns", "loopback"] = "netns"
    with_sip: bool = False  # livekit-sip (implies Redis)
    with_redis: bool = False  # Redis for livekit-server (its SIP API needs it)
    with_worker: bool = False
    with_web: bool = False
    capture: bool = True
    livekit_port: int = 7880
    rtc_tcp_port: int = 7881
    rtc_udp_port: int = 7882
    redis_port: int = 6379
    sip_port: int = 5060
    sip_rtp_start: int = 10000
    sip_rtp_end: int = 10100
    web_port: int = 8080
    agent_name: str = "parley"
    worker_env: dict[str, str] = field(default_factory=dict)
    # worker options (`worker.py --set NAME=VALUE`): options are never read from the environment
    worker_options: dict[str, str] = field(default_factory=dict)
    # given to every process before the stack's own variables (e.g. the caller's PARLEY_* settings)
    base_env: dict[str, str] = field(default_factory=dict)
    # how to run the worker; None = `python worker.py start`
    worker_cmd: list[str] | None = None
    ready_timeout_s: float = 60.0

    @property
    def redis(self) -> bool:
        return self.with_sip or self.with_redis

    worker_ready_timeout_s: float = 120.0


def livekit_server_config(opts: StackOptions, ns: Netns | HostLoopback) -> str:
    redis = f"redis:\n  address: 127.0.0.1:{opts.redis_port}\n" if opts.redis else ""
    loopback = isinstance(ns, HostLoopback)
    binds = '["127.0.0.1"]' if loopback else f'["127.0.0.1", "{ns.host_ip}"]'
    # loopback: only the lo interface's 127.0.0.1 is ever offered as a media candidate
    only_lo = "  interfaces:\n    includes: [lo]\n" if loopback else ""
    return f"""\
port: {opts.livekit_port}
bind_addresses: {binds}
rtc:
  tcp_port: {opts.rtc_tcp_port}
  udp_port: {opts.rtc_udp_port}
  node_ip: {ns.host_ip}
  use_external_ip: false
  stun_servers: ["{ns.host_ip}:3478"]
  enable_loopback_candidate: {"true" if loopback else "false"}
{only_lo}keys:
  {API_KEY}: {API_SECRET}
room:
  empty_timeout: 10
  departure_timeout: 2
logging:
  level: info
{redis}"""


def livekit_sip_config(opts: StackOptions, ns: Netns | HostLoopback) -> str:
    # No use_external_ip (it would ask a STUN server); the namespace address is announced as is.
    return f"""\
api_key: {API_KEY}
api_secret: {API_SECRET}
ws_url: ws://127.0.0.1:{opts.livekit_port}
redis:
  address: 127.0.0.1:{opts.redis_port}
sip_port: {opts.sip_port}
rtp_port: {opts.sip_rtp_start}-{opts.sip_rtp_end}
listen_ip: {ns.host_ip}
nat_1_to_1_ip: {ns.host_ip}
local_net: {ns.host_ip}/{ns.prefix}
use_external_ip: false
max_cpu_utilization: 0.99
logging:
  level: info
"""


class E2EStack:
    """Starts the requested parts in a fresh namespace (or on loopback); `close()` tears everything down."""

    def __init__(self, opts: StackOptions) -> None:
        self.opts = opts
        name = f"parley-e2e-{os.getpid()}-{secrets.token_hex(2)}"
        self.ns: Netns | HostLoopback = Netns(name) if opts.isolation == "netns" else HostLoopback(name)
        if opts.isolation == "loopback":
            opts.capture = False  # a capture on a shared host's loopback would see everyone's traffic
            tcp = free_ports(5)
            opts.livekit_port, opts.rtc_tcp_port, opts.redis_port, opts.web_port, opts.sip_port = tcp
            opts.rtc_udp_port = free_ports(1, socket.SOCK_DGRAM)[0]
        self.procs: list[ManagedProcess] = []
        self.capture_path = opts.out_dir / "capture.pcapng"
        self._capture: ManagedProcess | None = None
        opts.out_dir.mkdir(parents=True, exist_ok=True)

    # URLs as seen from inside the namespace
    @property
    def livekit_url(self) -> str:
        return f"ws://127.0.0.1:{self.opts.livekit_port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.opts.web_port}/"

    @property
    def sip_address(self) -> str:
        return f"{self.ns.host_ip}:{self.opts.sip_port}"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM", "USER", "HF_HUB_OFFLINE")
        }
        # worker.settings prefers the PARLEY_ names over LiveKit's: a caller's own server must not win
        env.update({k: v for k, v in self.opts.base_env.items() if not k.startswith("PARLEY_LIVEKIT_")})
        env.update(
            {
                "LIVEKIT_URL": self.livekit_url,
                "LIVEKIT_API_KEY": API_KEY,
                "LIVEKIT_API_SECRET": API_SECRET,
                "PARLEY_AGENT_NAME": self.opts.agent_name,
                "HF_HUB_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": str(REPO),
            }
        )
        env.update(extra or {})
        return env

    def spawn(
        self, name: str, cmd: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> ManagedProcess:
        log_path = self.opts.out_dir / f"{name}.log"
        log = log_path.open("wb")
        popen = subprocess.Popen(
            self.ns.wrap(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env or self.env(),
            cwd=cwd or REPO,
            start_new_session=True,
        )
        log.close()
        proc = ManagedProcess(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def run_in_ns(
        self, cmd: Sequence[str], timeout: float, env: dict[str, str] | None = None, phone: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run a client command inside the namespace (`phone`: the phone's own) and wait for it (killed
        with its group on timeout)."""
        popen = subprocess.Popen(
            self.ns.wrap_phone(cmd) if phone else self.ns.wrap(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env or self.env(),
            cwd=REPO,
            start_new_session=True,
        )
        try:
            out, err = popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            out, err = popen.communicate()
            raise StackError(
                f"{cmd[0]} ran past {timeout:.0f} s; last output: {(err or out)[-800:]}"
            ) from None
        except BaseException:  # Ctrl-C: the client is in its own session and would outlive us
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(5)
            raise
        return subprocess.CompletedProcess(cmd, popen.returncode, out, err)

    # readiness

    def wait_tcp(self, port: int, proc: ManagedProcess, host: str = "127.0.0.1") -> None:
        deadline = time.monotonic() + self.opts.ready_timeout_s
        probe = ["bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"]
        while time.monotonic() < deadline:
            if not proc.alive():
                raise StackError(f"{proc.name} exited early ({proc.log_path}):\n{proc.log_tail()}")
            if self.ns.run(probe, timeout=5).returncode == 0:
                return
            time.sleep(0.3)
        raise StackError(
            f"{proc.name} not listening on {host}:{port} after {self.opts.ready_timeout_s:.0f} s"
        )

    def wait_log(self, proc: ManagedProcess, pattern: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            if rx.search(proc.log_text()):
                return
            if not proc.alive():
                raise StackError(f"{proc.name} exited early ({proc.log_path}):\n{proc.log_tail()}")
            time.sleep(0.3)
        raise StackError(
            f"{proc.name}: no /{pattern}/ in its log after {timeout_s:.0f} s:\n{proc.log_tail()}"
        )

    # lifecycle

    def start(self) -> E2EStack:
        needed = ["netns", "livekit-server"] if self.opts.isolation == "netns" else ["livekit-server"]
        if self.opts.capture:
            needed.append("tshark")
        if self.opts.redis:
            needed.append("redis-server")
        if self.opts.with_sip:
            needed.append("livekit-sip")
        if self.opts.with_web:
            needed += ["web-page"]
        reason = missing_reason(*needed)
        if reason:
            raise ComponentMissing(reason)
        self.ns.create()
        self.ns.check_sealed()
        if self.opts.capture:
            self._capture = self.spawn(
                "tshark", ["tshark", "-q", "-n", "-i", "any", "-w", str(self.capture_path)]
            )
            self.wait_log(self._capture, r"Capturing on", 20)
        cfg = self.opts.out_dir / "livekit.yaml"
        cfg.write_text(livekit_server_config(self.opts, self.ns))
        if self.opts.redis:
            port = str(self.opts.redis_port)
            redis = self.spawn(
                "redis", ["redis-server", "--bind", "127.0.0.1", "--port", port, *NO_PERSISTENCE]
            )
            self.wait_tcp(self.opts.redis_port, redis)
        server = self.spawn("livekit-server", [str(find_binary("livekit-server")), "--config", str(cfg)])
        self.wait_tcp(self.opts.livekit_port, server)
        if self.opts.with_sip:
            sip_cfg = self.opts.out_dir / "livekit-sip.yaml"
            sip_cfg.write_text(livekit_sip_config(self.opts, self.ns))
            sip = self.spawn("livekit-sip", [str(find_binary("livekit-sip")), "--config", str(sip_cfg)])
            self.wait_log(
                sip, r"(?i)sip signaling listening|service ready|started", self.opts.ready_timeout_s
            )
        if self.opts.with_web:
            # --dev: no access key, allowed because the page listens on loopback only
            web_cmd = ["-m", "web.server", "--host", "127.0.0.1", "--port", str(self.opts.web_port), "--dev"]
            web = self.spawn("web", [str(PYTHON), *web_cmd])
            self.wait_tcp(self.opts.web_port, web)
        if self.opts.with_worker:
            self.start_worker()
        return self

    def start_worker(
        self, name: str = "worker", env: dict[str, str] | None = None, options: dict[str, str] | None = None
    ) -> ManagedProcess:
        """Start one worker (more than one may run: give each its own name, agent name and wiring)."""
        worker_py = REPO / "worker.py"
        if not worker_py.is_file():
            raise ComponentMissing("worker.py not present yet: the Parley worker is not in this checkout")
        cmd = self.opts.worker_cmd or [str(PYTHON), str(worker_py), "start"]
        cmd = [*cmd, *(f"--set={k}={v}" for k, v in {**self.opts.worker_options, **(options or {})}.items())]
        worker = self.spawn(name, cmd, env=self.env({**self.opts.worker_env, **(env or {})}))
        self.wait_log(worker, r"(?i)registered worker", self.opts.worker_ready_timeout_s)
        return worker

    def close(self) -> None:
        """Stop everything this stack started and delete the namespace (safe to call twice)."""
        for proc in reversed(self.procs):
            if proc is not self._capture:
                proc.stop()
        if self._capture is not None:
            time.sleep(0.5)  # let the last packets be written
            self._capture.stop(signal.SIGINT)
        self.ns.destroy()

    def __enter__(self) -> E2EStack:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the leak check

    def capture_summary(self) -> tuple[int, list[str]]:
        """(packets captured, those whose source or destination is not one of the namespace's addresses)."""
        if not self.capture_path.is_file():
            raise StackError("no capture file was written")
        fields = ["frame.number", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst"]
        res = subprocess.run(
            ["tshark", "-n", "-r", str(self.capture_path), "-T", "fields", "-E", "separator=,"]
            + [arg for f in fields for arg in ("-e", f)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        own = self.ns.own_addresses()
        count, bad = 0, []
        for line in res.stdout.splitlines():
            count += 1
            frame, *addrs = line.split(",")
            for a in filter(None, addrs):
                if not (ipaddress.ip_address(a).is_loopback or a in own):
                    bad.append(f"frame {frame}: {line}")
                    break
        return count, bad


@contextlib.contextmanager
def running_stack(opts: StackOptions) -> Iterator[E2EStack]:
    stack = E2EStack(opts)
    with stack:
        yield stack
