"""Where the embedded LLM's time goes, read from llama.cpp's own log.

    python -m benchmarks.load --livekit --calls 4 --minutes 2   # with the worker option llm_embedded_log
    python -m benchmarks.llm_log out/llm.log [--skip-s 10] [--json F]

One LLM thread serves every call on the host: the replies and the end-of-turn scorer's reads (one generated
token each). Under load the question is whether replies wait for the scorer, for prompt reads, or for a core;
the server's own per-request timings answer it without instrumenting the worker. A request the worker
stopped reading (a reply cut at its sentence cap, a preemptive generation thrown away) is cancelled and
prints no timings: it is counted apart.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks.cli import emit, fail
from benchmarks.report import pct

_LINE = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) \w (\w+)\s+(\S+): id +(\d+) \| task (-?\d+) \| (.*)$")
_TIMING = re.compile(r"= +([\d.]+) ms / +(\d+) tokens")


@dataclass
class Task:
    """One request, as the server saw it."""

    start: float | None = None
    end: float | None = None
    prompt_ms: float | None = None
    prompt_tokens: int | None = None
    eval_ms: float | None = None
    eval_tokens: int | None = None

    @property
    def kind(self) -> str:
        if self.eval_tokens is None:
            return "cancelled"
        return "scorer" if self.eval_tokens <= 1 else "reply"


def _seconds(m: re.Match[str]) -> float:
    minutes, secs, ms, us = (int(m[i]) for i in range(1, 5))
    return minutes * 60 + secs + ms / 1e3 + us / 1e6


def parse(lines: Iterable[str]) -> dict[int, Task]:
    """Tasks by id, from llama.cpp server log lines (`M.SS.mmm.uuu L cat func: id N | task T | ...`)."""
    tasks: dict[int, Task] = {}
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if not m or int(m[8]) < 0:
            continue
        task, func, rest = tasks.setdefault(int(m[8]), Task()), m[6], m[9]
        if func == "launch_slot_":
            task.start = _seconds(m)
        elif func == "release":
            task.end = _seconds(m)
        elif "prompt eval time" in rest and (t := _TIMING.search(rest)):
            task.prompt_ms, task.prompt_tokens = float(t[1]), int(t[2])
        elif rest.lstrip().startswith("eval time") and (t := _TIMING.search(rest)):
            task.eval_ms, task.eval_tokens = float(t[1]), int(t[2])
    return tasks


def _busy_s(spans: list[tuple[float, float]]) -> float:
    """Seconds in which at least one request was in flight (the union of their spans)."""
    total, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur is not None else 0.0)


def summarise(tasks: dict[int, Task], skip_s: float = 10.0) -> dict[str, Any]:
    """Per kind of request: count, rate, wall and prompt-read times; replies' ms per generated token."""
    done = [t for t in tasks.values() if t.start is not None and t.end is not None and t.start >= skip_s]
    if not done:
        raise ValueError("no finished request in the log after the warm-up (is it llama.cpp's server log?)")
    span = max(t.end for t in done if t.end is not None) - min(t.start for t in done if t.start is not None)
    out: dict[str, Any] = {"span_s": round(span, 1)}
    for kind in ("scorer", "reply", "cancelled"):
        ts = [t for t in done if t.kind == kind]
        wall = [1000 * (t.end - t.start) for t in ts if t.end is not None and t.start is not None]
        row: dict[str, Any] = {
            "requests": len(ts),
            "per_s": round(len(ts) / span, 2) if span > 0 else None,
            "wall_ms": {"p50": pct(wall, 50), "p90": pct(wall, 90)},
        }
        if kind != "cancelled":
            row["prompt_tokens_p50"] = pct([float(t.prompt_tokens or 0) for t in ts], 50)
            row["prompt_ms"] = {
                "p50": pct([t.prompt_ms or 0.0 for t in ts], 50),
                "p90": pct([t.prompt_ms or 0.0 for t in ts], 90),
            }
        if kind == "reply":
            per_token = [(t.eval_ms or 0.0) / max(1, t.eval_tokens or 0) for t in ts]
            row["generated_tokens_p50"] = pct([float(t.eval_tokens or 0) for t in ts], 50)
            row["ms_per_token"] = {"p50": pct(per_token, 50), "p90": pct(per_token, 90)}
        out[kind] = row
    spans = [(t.start, t.end) for t in done if t.start is not None and t.end is not None]
    out["in_flight_share"] = round(_busy_s(spans) / span, 3) if span > 0 else None
    return out


def print_table(report: dict[str, Any]) -> None:
    print(f"llama.cpp log, {report['span_s']} s after the warm-up; in flight {report['in_flight_share']}")
    for kind in ("scorer", "reply", "cancelled"):
        r = report[kind]
        wall = r["wall_ms"]
        line = f"  {kind:<9} {r['requests']:>4} ({r['per_s']}/s)  wall p50/p90 {wall['p50']}/{wall['p90']} ms"
        if "prompt_ms" in r:
            line += (
                f"  prompt {r['prompt_tokens_p50']} tok in {r['prompt_ms']['p50']}/{r['prompt_ms']['p90']} ms"
            )
        if "ms_per_token" in r:
            line += f"  {r['ms_per_token']['p50']}/{r['ms_per_token']['p90']} ms per generated token"
        print(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="llama.cpp's log (the worker option llm_embedded_log)")
    ap.add_argument(
        "--skip-s", type=float, default=10.0, help="ignore requests started before this (warm-up)"
    )
    ap.add_argument("--json", help="write the report here")
    args = ap.parse_args(argv)
    try:
        with open(args.log, encoding="utf-8", errors="replace") as f:
            report = summarise(parse(f), args.skip_s)
    except (OSError, ValueError) as e:
        return fail(e)
    return emit(report, print_table, args.json)


if __name__ == "__main__":
    sys.exit(main())
