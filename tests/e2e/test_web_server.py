"""The call page's server on loopback: the token endpoint, its guards (key, Host, rate limit), the page."""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request
from livekit import api

from web.access import KEY_COOKIE, KEY_HEADER, AccessOptions, RateLimit, client_id
from web.server import PageOptions, access_options, make_app
from web.tokens import TokenOptions

SECRET = "s" * 32


def options(key: bytes | None = None, rate: RateLimit | None = None) -> PageOptions:
    return PageOptions(
        livekit_url="ws://127.0.0.1:7880",
        tokens=TokenOptions(api_key="k", api_secret=SECRET, agent_name="parley", ttl_s=60),
        access=AccessOptions(key=key, rate=rate or RateLimit()),
    )


async def test_token_endpoint_picks_the_room_and_identity_and_grants_the_microphone_only() -> None:
    async with TestClient(TestServer(make_app(options()), host="127.0.0.1")) as client:
        res = await client.get("/token")
        assert res.status == 200
        body = await res.json()
        assert body["url"] == "ws://127.0.0.1:7880" and body["room"].startswith("parley-")
        claims = api.TokenVerifier("k", SECRET).verify(body["token"])
        video = claims.video
        assert video is not None and video.room == body["room"] and video.room_join
        assert claims.identity == body["identity"] and body["identity"].startswith("caller-")
        assert video.can_publish_sources == ["microphone"] and video.can_subscribe
        assert not video.can_publish_data and not video.room_admin and not video.room_create
        assert [a.agent_name for a in claims.room_config.agents] == ["parley"]
        again = await (await client.get("/token")).json()
        assert again["room"] != body["room"] and again["identity"] != body["identity"]
        # a client can neither pick a room (to listen in) nor an identity (to evict someone)
        for params in ({"room": "demo"}, {"identity": "ann"}):
            chosen = await client.get("/token", params=params)
            assert chosen.status == 400
            assert "server picks" in (await chosen.json())["error"]


async def test_token_endpoint_needs_the_key_when_one_is_set() -> None:
    async with TestClient(TestServer(make_app(options(key=b"k3y-\xc3\xa9")), host="127.0.0.1")) as client:
        assert (await client.get("/token")).status == 401
        assert (await client.get("/token", headers={KEY_HEADER: "wrong"})).status == 401
        # a non-ASCII guess is compared as bytes, not a crash
        assert (await client.get("/token", headers={KEY_HEADER: "k3y-ü"})).status == 401
        assert (await client.get("/token", headers={KEY_HEADER: "k3y-é"})).status == 200
        client.session.cookie_jar.update_cookies({KEY_COOKIE: "k3y-é"})
        assert (await client.get("/token")).status == 200
        # the page itself needs no key
        assert (await client.get("/", headers={KEY_HEADER: ""})).status == 200


async def test_foreign_host_header_is_refused_against_dns_rebinding() -> None:
    async with TestClient(TestServer(make_app(options()), host="127.0.0.1")) as client:
        for path in ("/token", "/"):
            res = await client.get(path, headers={"Host": "attacker.example:8080"})
            assert res.status == 421, path
        assert (await client.get("/token", headers={"Host": "localhost:8080"})).status == 200


async def test_200_token_requests_in_10_s_from_one_client_are_rate_limited_others_still_served() -> None:
    budget = RateLimit(burst=10, per_s=0.2)
    async with TestClient(TestServer(make_app(options(rate=budget)), host="127.0.0.1")) as client:
        started = time.monotonic()
        answers = await asyncio.gather(*(client.get("/token") for _ in range(200)))
        elapsed = time.monotonic() - started
        assert elapsed < 10.0
        codes = [r.status for r in answers]
        allowed = codes.count(200)
        assert budget.burst <= allowed <= budget.burst + int(elapsed * budget.per_s) + 1, codes
        assert codes.count(429) == 200 - allowed
        limited = next(r for r in answers if r.status == 429)
        assert int(limited.headers["Retry-After"]) >= 1
        # another client (another loopback source address) still gets a token, and the page still loads
        other = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        url = client.make_url("/token")
        async with aiohttp.ClientSession(connector=other) as session, session.get(url) as res:
            assert res.status == 200
        assert (await client.get("/")).status == 200


def cli(*argv: str) -> argparse.Namespace:
    base = {"host": "127.0.0.1", "port": 8080, "dev": False, "key_file": None, "allowed_host": []}
    base.update({"rate_burst": 10, "rate_per_min": 12.0, "trust_proxy": []})
    args = argparse.Namespace(**base)
    for item in argv:
        name, _, value = item.partition("=")
        if name == "allowed_host":
            args.allowed_host.append(value)
        else:
            setattr(args, name, value if value else True)
    return args


def test_server_refuses_to_start_open(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("PARLEY_WEB_KEY", raising=False)
    with pytest.raises(ValueError, match="PARLEY_WEB_KEY"):
        access_options(cli())
    with pytest.raises(ValueError, match="only on loopback"):
        access_options(cli("host=0.0.0.0", "dev"))
    assert access_options(cli("dev")).key is None
    monkeypatch.setenv("PARLEY_WEB_KEY", "abcdefgh-12345678")
    with pytest.raises(ValueError, match="--allowed-host"):
        access_options(cli("host=0.0.0.0"))
    wide = access_options(cli("host=0.0.0.0", "allowed_host=call.example.org"))
    assert wide.key == b"abcdefgh-12345678" and wide.allowed_hosts == {"call.example.org"}
    keyfile = tmp_path / "key"
    keyfile.write_text("from-file-0123456\n")
    args = cli()
    args.key_file = keyfile
    assert access_options(args).key == b"from-file-0123456"


def test_server_refuses_a_key_shorter_than_16_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_WEB_KEY", "abc")
    with pytest.raises(ValueError, match="at least 16 characters") as err:
        access_options(cli())
    assert "\n" not in str(err.value)
    monkeypatch.setenv("PARLEY_WEB_KEY", "x" * 16)
    assert access_options(cli()).key == b"x" * 16
    args = cli()
    args.trust_proxy = ["not-an-address"]
    with pytest.raises(ValueError, match="--trust-proxy"):
        access_options(args)


async def test_wrong_keys_spend_the_rate_budget_before_the_key_is_checked() -> None:
    budget = RateLimit(burst=3, per_s=0.001)
    key = "right-key-0123456"
    async with TestClient(TestServer(make_app(options(key.encode(), budget)), host="127.0.0.1")) as client:
        guesses = [(await client.get("/token", headers={KEY_HEADER: f"guess-{i}"})).status for i in range(5)]
        assert guesses == [401, 401, 401, 429, 429]  # a weak key cannot be guessed without limit
        assert (await client.get("/token", headers={KEY_HEADER: key})).status == 429


async def test_token_answers_are_never_cached() -> None:
    async with TestClient(TestServer(make_app(options(b"right-key-0123456")), host="127.0.0.1")) as client:
        refused = await client.get("/token")
        granted = await client.get("/token", headers={KEY_HEADER: "right-key-0123456"})
        assert (refused.status, granted.status) == (401, 200)
        for res in (refused, granted):
            assert res.headers["Cache-Control"] == "no-store"


def test_rate_limit_counts_an_ipv6_client_by_its_64_and_a_forwarded_one_only_behind_a_trusted_proxy() -> None:
    def request(peer: str, forwarded: str = "") -> web.Request:
        headers = {"X-Forwarded-For": forwarded} if forwarded else {}
        return make_mocked_request("GET", "/token", headers=headers).clone(remote=peer)

    a, b = request("2001:db8:1:2::1"), request("2001:db8:1:2:ffff:1:2:3")
    assert client_id(a) == client_id(b) == "2001:db8:1:2::/64"  # rotating within the /64 gains nothing
    assert client_id(request("2001:db8:1:3::1")) != client_id(a)
    assert client_id(request("::ffff:192.0.2.7")) == "192.0.2.7"
    proxy = frozenset({"10.0.0.5"})
    # behind the proxy: each caller counted apart, by the hop the proxy appended
    assert client_id(request("10.0.0.5", "198.51.100.1"), proxy) == "198.51.100.1"
    assert client_id(request("10.0.0.5", "6.6.6.6, 198.51.100.2"), proxy) == "198.51.100.2"
    # a client that is not the trusted proxy cannot pick its own bucket
    assert client_id(request("203.0.113.9", "198.51.100.1"), proxy) == "203.0.113.9"
    assert client_id(request("10.0.0.5", "198.51.100.1")) == "10.0.0.5"  # no --trust-proxy: the peer


async def test_page_is_served_with_its_script() -> None:
    async with TestClient(TestServer(make_app(options()), host="127.0.0.1")) as client:
        page = await client.get("/")
        assert page.status == 200 and 'id="transcripts"' in await page.text()
        script = await client.get("/app.js")
        # built by `make setup`; a clear 503 (not a crash) when it is not
        assert script.status in (200, 503)
        if script.status == 503:
            assert "npm run build" in await script.text()
