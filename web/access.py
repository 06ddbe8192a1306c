"""Who may use the call page's server: a Host allow-list, an access key, a per-client rate limit.

Every token the endpoint hands out starts an agent (which costs a worker slot that a phone caller may need),
so `/token` is guarded three ways. The Host check stops DNS rebinding (a page on another origin resolving
its name to 127.0.0.1 and reading the answers); the key keeps strangers out when the server is reachable
from other machines; the rate limit bounds what any one client (even with the key) can start.

The rate limit comes before the key check, so a wrong key costs a guess from the same budget (issue 66),
and the key has at least `MIN_KEY_LEN` characters. A client is its address, or its /64 for IPv6 (one
subscriber's allocation: rotating within it gains nothing); behind a reverse proxy named with
`--trust-proxy` it is the address that proxy appended to X-Forwarded-For (anyone else's header is ignored).
"""

from __future__ import annotations

import hmac
import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from aiohttp import web

KEY_HEADER = "X-Parley-Key"
KEY_COOKIE = "parley_key"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
MIN_KEY_LEN = 16


@dataclass(frozen=True)
class RateLimit:
    """A token bucket per client address: `burst` requests at once, then one every 1/`per_s` seconds."""

    burst: int = 10
    per_s: float = 0.2
    max_clients: int = 10_000  # oldest buckets are forgotten past this, so memory stays bounded


@dataclass(frozen=True)
class AccessOptions:
    key: bytes | None  # None = no key (only allowed on loopback with --dev; see web.server.main)
    allowed_hosts: frozenset[str] = field(default_factory=lambda: LOOPBACK_HOSTS)  # names, port ignored
    rate: RateLimit = field(default_factory=RateLimit)
    trusted_proxies: frozenset[str] = frozenset()
    """Peer addresses whose X-Forwarded-For names the client (the reverse proxy in front)."""


def host_name(host: str) -> str:
    """The name part of a Host header ("[::1]:8080" -> "[::1]", "example.org:80" -> "example.org")."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0].lower()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class RateLimiter:
    """Per-client token buckets; `allow` answers (allowed, seconds until the next request would be)."""

    def __init__(self, opts: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self._opts = opts
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)

    def allow(self, client: str) -> tuple[bool, float]:
        now = self._clock()
        tokens, at = self._buckets.pop(client, (float(self._opts.burst), now))
        tokens = min(float(self._opts.burst), tokens + (now - at) * self._opts.per_s)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self._opts.max_clients:
            self._buckets.popitem(last=False)
        wait = 0.0 if allowed else (1.0 - tokens) / self._opts.per_s if self._opts.per_s > 0 else math.inf
        return allowed, wait


def client_id(request: web.Request, trusted_proxies: frozenset[str] = frozenset()) -> str:
    """Who the rate limit counts: the peer, or the last X-Forwarded-For hop when the peer is a trusted
    proxy; an IPv6 client by its /64."""
    peer = request.remote or "?"
    if peer in trusted_proxies:
        hops = [h.strip() for h in ",".join(request.headers.getall("X-Forwarded-For", [])).split(",")]
        if hops and hops[-1]:
            peer = hops[-1]  # what our proxy saw; the earlier hops are whatever the client wrote
    try:
        addr = ipaddress.ip_address(peer.strip("[]"))
    except ValueError:
        return peer
    if addr.version == 6 and addr.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{addr}/64", strict=False))
    return str(addr.ipv4_mapped or addr) if addr.version == 6 else str(addr)


def key_matches(expected: bytes, request: web.Request) -> bool:
    given = request.headers.get(KEY_HEADER) or request.cookies.get(KEY_COOKIE) or ""
    return hmac.compare_digest(expected, given.encode("utf-8", "surrogateescape"))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def access_middleware(
    opts: AccessOptions, guarded: Iterable[str]
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Host check on every path; key and rate limit on the `guarded` paths (the ones that start agents)."""
    limiter = RateLimiter(opts.rate)
    guarded_paths = frozenset(guarded)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if host_name(request.host) not in opts.allowed_hosts:
            return web.json_response({"error": "this host name is not served here"}, status=421)
        if request.path not in guarded_paths:
            return await handler(request)
        response = await guard(request, handler)
        response.headers["Cache-Control"] = "no-store"  # a token (or its refusal) is never cached
        return response

    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        allowed, wait = limiter.allow(client_id(request, opts.trusted_proxies))
        if not allowed:  # before the key: a wrong guess spends the same budget as a right one
            return web.json_response(
                {"error": "too many requests from this client"},
                status=429,
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
        if opts.key is not None and not key_matches(opts.key, request):
            return web.json_response({"error": f"missing or wrong {KEY_HEADER}"}, status=401)
        return await handler(request)

    return middleware
