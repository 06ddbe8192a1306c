"""A loopback HTTP proxy that holds every request for `delay_s` before passing it to the real LLM server.

Named for what it is: a fault injector at the LLM boundary (the model behind it is the real embedded LLM).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import ClientSession, web


@contextlib.asynccontextmanager
async def slow_proxy(upstream: str, delay_s: float) -> AsyncIterator[str]:
    """Yields the proxy's /v1 base URL; `upstream` is the real server's /v1 base URL."""
    base = upstream.rstrip("/").removesuffix("/v1")
    client = ClientSession()

    async def handle(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay_s)
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with client.request(
            request.method, base + request.rel_url.path_qs, data=body, headers=headers
        ) as up:
            resp = web.StreamResponse(
                status=up.status, headers={"Content-Type": up.headers.get("Content-Type", "")}
            )
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()
        await client.close()
