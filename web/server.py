"""Serves the call page and its token endpoint: `python -m web.server [--host H] [--port P] [--dev]`.

LiveKit URL and keys come from Parley's settings (LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET,
PARLEY_AGENT_NAME). The page must be built first (`cd web && npm ci && npm run build`).
`/token` needs the access key (PARLEY_WEB_KEY or --key-file; sent as X-Parley-Key or the parley_key cookie)
unless the server listens on loopback and was started with --dev. It is a development server: in
production put it behind a reverse proxy that terminates TLS and authenticates callers.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from web.access import LOOPBACK_HOSTS, MIN_KEY_LEN, AccessOptions, RateLimit, access_middleware, is_loopback
from web.tokens import TokenOptions, issue_call_token

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
    access: AccessOptions
    # What the browser should use to reach LiveKit; defaults to livekit_url.
    public_livekit_url: str = ""


def make_app(opts: PageOptions) -> web.Application:
    """The page's HTTP app: static files and GET /token (the server picks the room and the identity)."""

    async def token(request: web.Request) -> web.Response:
        if "room" in request.query or "identity" in request.query:
            return web.json_response({"error": "the server picks the room and the identity"}, status=400)
        t = issue_call_token(opts.tokens)
        logger.info("issued call token")
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

    app = web.Application(middlewares=[access_middleware(opts.access, guarded=["/token"])])
    app.router.add_get("/token", token)
    for route, (path, ctype) in STATIC_FILES.items():
        app.router.add_get(route, static(path, ctype))
    return app


def access_options(args: argparse.Namespace) -> AccessOptions:
    """The access rules the command line asks for, refusing the combinations that would be open."""
    loopback = is_loopback(args.host)
    key = os.environ.get("PARLEY_WEB_KEY", "")
    if args.key_file is not None:
        try:
            key = args.key_file.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise ValueError(f"cannot read --key-file {args.key_file}: {err.strerror}") from None
    if args.dev and not loopback:
        raise ValueError(f"--dev serves /token without a key, so only on loopback (not {args.host})")
    if not key and not args.dev:
        raise ValueError("set PARLEY_WEB_KEY or --key-file (or --dev on loopback for local development)")
    if key and len(key) < MIN_KEY_LEN:
        raise ValueError(f"the access key must be at least {MIN_KEY_LEN} characters (it has {len(key)})")
    hosts = {h.lower() for h in args.allowed_host}
    if loopback:
        hosts |= LOOPBACK_HOSTS
    elif not hosts:
        raise ValueError("--allowed-host NAME is required when listening beyond loopback")
    return AccessOptions(
        key=key.encode("utf-8") if key else None,
        allowed_hosts=frozenset(hosts),
        rate=RateLimit(burst=args.rate_burst, per_s=args.rate_per_min / 60.0),
        trusted_proxies=frozenset(_proxy_address(a) for a in args.trust_proxy),
    )


def _proxy_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"--trust-proxy takes the proxy's IP address (got {text!r})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m web.server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ttl-s", type=int, default=120, help="token lifetime in seconds")
    parser.add_argument("--dev", action="store_true", help="no access key (only allowed on loopback)")
    parser.add_argument("--key-file", type=Path, help="file holding the access key (else PARLEY_WEB_KEY)")
    parser.add_argument(
        "--allowed-host", action="append", default=[], help="a host name the page is served under"
    )
    parser.add_argument(
        "--trust-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="the reverse proxy's IP: the rate limit counts the client its X-Forwarded-For names",
    )
    parser.add_argument("--rate-burst", type=int, default=10, help="/token requests one client may burst")
    parser.add_argument(
        "--rate-per-min", type=float, default=12.0, help="/token requests per client per minute"
    )
    args = parser.parse_args(argv)
    try:
        access = access_options(args)
    except ValueError as err:
        print(f"web.server: {err}", file=sys.stderr)
        return 2

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
        access=access,
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
