"""A receiver for the end-of-call report, to see what your backend will get before you write it.

    python -m worker.call_report_receiver --port 8787 [--secret-file F] [--out reports.jsonl]
    PARLEY_CALL_REPORT_URL=http://127.0.0.1:8787/report python worker.py dev

Each report is checked (JSON; with a secret, its `X-Parley-Signature` and a `report_id` not seen within the
signature's age limit), appended to `--out` as one JSON line and summarised on stdout in one line. A report
that fails a check is answered 400 (bad JSON, no `report_id`), 401 (bad signature) or 409 (a replay, or
the sender's retry of one already kept) and not kept. Bodies over `--max-bytes` are refused with 413.
Loopback only unless `--host` says otherwise. The end-to-end test of the report runs this in the call's
network namespace.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from .call_report import SIGNATURE_HEADER, verify_signature

MAX_AGE_S = 300.0  # a signature older than this is refused; an id is remembered this long


class SeenIds:
    """Report ids received within the signature's age limit: older ones cannot be replayed anyway (the
    signature has expired), so memory is bounded by the reports of `max_age_s`."""

    def __init__(self, max_age_s: float = MAX_AGE_S) -> None:
        self.max_age_s = max_age_s
        self._seen: dict[str, float] = {}  # insertion order = arrival order

    def first_time(self, report_id: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        while self._seen:
            oldest, at = next(iter(self._seen.items()))
            if now - at <= 2 * self.max_age_s:  # the clock skew a signature may have, both ways
                break
            del self._seen[oldest]
        if report_id in self._seen:
            return False
        self._seen[report_id] = now
        return True


def make_app(out: Path | None, secret: str = "", max_bytes: int = 1 << 20) -> web.Application:
    seen = SeenIds()

    async def report(request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > max_bytes:
            return web.Response(status=413, text="report too large\n")
        body = await request.content.read(max_bytes + 1)
        if len(body) > max_bytes:
            return web.Response(status=413, text="report too large\n")
        if secret and not verify_signature(secret, request.headers.get(SIGNATURE_HEADER, ""), body):
            print("refused a report: bad or missing signature", flush=True)
            return web.Response(status=401, text="bad signature\n")
        try:
            doc: Any = json.loads(body)
        except ValueError:
            return web.Response(status=400, text="not JSON\n")
        if not isinstance(doc, dict):
            return web.Response(status=400, text="not a JSON object\n")
        if secret:
            rid = doc.get("report_id")
            if not isinstance(rid, str) or not 0 < len(rid) <= 64:
                return web.Response(status=400, text="no report_id\n")
            if not seen.first_time(rid):
                print("refused a report: already received (a replay or a retry)", flush=True)
                return web.Response(status=409, text="already received\n")
        if out is not None:
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
        print(
            f"call report: {doc.get('agent')} {doc.get('channel')} {doc.get('duration_s')} s, "
            f"ended by {doc.get('ended_by')}, {doc.get('caller_turns')} caller turns, "
            f"reply p50 {(doc.get('reply_latency_ms') or {}).get('p50')} ms",
            flush=True,
        )
        return web.Response(status=204)

    app = web.Application(client_max_size=max_bytes)
    app.router.add_post("/report", report)
    return app


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m worker.call_report_receiver", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8787)
    ap.add_argument("--secret-file", help="the shared secret (the worker's PARLEY_CALL_REPORT_SECRET)")
    ap.add_argument("--out", help="append each report here as one JSON line")
    ap.add_argument("--max-bytes", type=int, default=1 << 20)
    a = ap.parse_args(argv)
    secret = Path(a.secret_file).read_text().strip() if a.secret_file else ""
    print(f"receiving call reports on http://{a.host}:{a.port}/report", flush=True)
    web.run_app(
        make_app(Path(a.out) if a.out else None, secret, a.max_bytes),
        host=a.host,
        port=a.port,
        print=None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
