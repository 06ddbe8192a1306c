"""The call page's HTTP server on loopback: token endpoint and static files."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer
from livekit import api

from web.server import PageOptions, make_app
from web.tokens import TokenOptions

SECRET = "s" * 32


def options() -> PageOptions:
    return PageOptions(
        livekit_url="ws://127.0.0.1:7880",
        tokens=TokenOptions(api_key="k", api_secret=SECRET, agent_name="parley", ttl_s=60),
    )


async def test_token_endpoint_issues_a_room_token_and_refuses_bad_names() -> None:
    async with TestClient(TestServer(make_app(options()), host="127.0.0.1")) as client:
        res = await client.get("/token", params={"room": "demo", "identity": "ann"})
        assert res.status == 200
        body = await res.json()
        assert body["url"] == "ws://127.0.0.1:7880" and body["room"] == "demo"
        claims = api.TokenVerifier("k", SECRET).verify(body["token"])
        assert claims.video is not None and claims.video.room == "demo"
        bad = await client.get("/token", params={"room": "a b/c"})
        assert bad.status == 400
        assert "room must be" in (await bad.json())["error"]


async def test_page_is_served_with_its_script() -> None:
    async with TestClient(TestServer(make_app(options()), host="127.0.0.1")) as client:
        page = await client.get("/")
        assert page.status == 200 and 'id="transcripts"' in await page.text()
        script = await client.get("/app.js")
        # built by `make setup`; a clear 503 (not a crash) when it is not
        assert script.status in (200, 503)
        if script.status == 503:
            assert "npm run build" in await script.text()
