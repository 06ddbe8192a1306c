"""Serves the call page and its token endpoint: `python -m web.server [--host H] [--port P]`.

LiveKit URL and keys come from Parley's settings (LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET,
PARLEY_AGENT_NAME). The page must be built first (`cd web && npm ci && npm run build`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from web.tokens import TokenOptions, TokenRequestError, issue_call_token

logger = logging.getLogger("parley.web")

WEB_DIR = Path(__file__).resolve().parent
STATIC_FILES = {
    "/": (WEB_DIR / "static" / "index.html", "text/html"),
    "/style.css": (WEB_DIR / "static" / "style.css", "text/css"),
    "/app.js": (WEB_DIR / "dist" / "app.js", "text/javascript"),
    "/app.js.map": (WEB_DIR / "dist" / "app.js.map", "application/json"),
}


@dataclass(frozen=True)
class PageOptions:
    livekit_url: str
    tokens: TokenOptions
    # What the browser should use to reach LiveKit; defaults to livekit_url.
    public_livekit_url: str = ""


def make_app(opts: PageOptions) -> web.Application:
    """The page's HTTP app: static files and GET /token?room=&identity=."""

    async def token(request: web.Request) -> web.Response:
        try:
            t = issue_call_token(opts.tokens, request.query.get("room"), request.query.get("identity"))
        except TokenRequestError as err:
            return web.json_response({"error": str(err)}, status=400)
        logger.info("issued call token", extra={"room": t.room, "identity": t.identity})
        url = opts.public_livekit_url or opts.livekit_url
        return web.json_response({"url": url, "token": t.token, "room": t.room, "identity": t.identity})

    def static(path: Path, content_type: str):
        async def handler(_: web.Request) -> web.StreamResponse:
            if not path.is_file():
                return web.Response(
                    status=503, text="call page not built: run `cd web && npm ci && npm run build`"
                )
            return web.FileResponse(path, headers={"Content-Type": content_type, "Cache-Control": "no-store"})

        return handler

    app = web.Application()
    app.router.add_get("/token", token)
    for route, (path, ctype) in STATIC_FILES.items():
        app.router.add_get(route, static(path, ctype))
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m web.server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ttl-s", type=int, default=600, help="token lifetime in seconds")
    args = parser.parse_args(argv)

    from worker.settings import load_settings

    settings = load_settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    opts = PageOptions(
        livekit_url=settings.livekit_url,
        tokens=TokenOptions(
            api_key=settings.livekit_api_key,
            api_secret=settings.livekit_api_secret.get_secret_value(),
            agent_name=settings.agent_name,
            ttl_s=args.ttl_s,
        ),
    )
    print(f"parley call page: http://{args.host}:{args.port}/", flush=True)
    try:
        web.run_app(make_app(opts), host=args.host, port=args.port, print=None)
    except OSError as err:
        print(f"web.server: cannot listen on {args.host}:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
