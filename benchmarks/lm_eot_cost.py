"""What the language-model end-of-turn scorer costs: ms per query and the server's CPU per query.

    python -m benchmarks.lm_eot_cost [--data out/corpus/test/web] [--queries 200] [--calls 3] [--json F]

Starts the embedded SmolLM2 server (worker/llm_server.py, one slot per caller) and asks it the way the
worker does: each transcript's growing prefixes, word by word (one interim per word, the worst case; the
streaming STT sends one every 0.3-1 s), from `--calls` callers at once; a prefix a caller already asked
comes from its cache and is not counted. Transcripts are the corpus's reference texts (`.txt` next to each
WAV). Reports query wall time p50/p95 and the server process's CPU seconds per query (from /proc), and from
those the CPU share the scorer would take at `--calls` concurrent calls with one interim per second each.
JSON: `query_ms` {p50, p95}, `cpu_ms_per_query`, `cpu_share_at_calls` (0-1 of one core), `queries`, `calls`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cli import emit
from turn_detection.lm_eot import LmEotOptions, LmEotScorer


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prefixes(texts: list[str], limit: int) -> list[str]:
    out: list[str] = []
    for t in texts:
        words = t.split()
        out += [" ".join(words[:i]) for i in range(1, len(words) + 1)]
    return out[:limit]


def run(data: Path, queries: int, calls: int) -> dict[str, Any]:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions

    texts = [p.read_text().strip() for p in sorted(data.glob("*.txt"))]
    texts = [t for t in texts if t]
    if not texts:
        raise SystemExit(f"error: no transcripts (*.txt) in {data}")
    asks = prefixes(texts, queries)
    with EmbeddedLLM(EmbeddedLLMOptions(n_parallel=calls, n_ctx=1024)) as server:
        assert server._proc is not None
        pid = server._proc.pid
        scorers = [
            LmEotScorer(LmEotOptions(url=server.base_url, request_timeout_s=30, extra_body={"id_slot": i}))
            for i in range(calls)
        ]
        scorers[0].score_sync("warm up")
        cpu0, t0 = _cpu_seconds(pid), time.perf_counter()
        with ThreadPoolExecutor(calls) as pool:
            list(pool.map(lambda i: [scorers[i].score_sync(a) for a in asks[i::calls]], range(calls)))
        wall, cpu = time.perf_counter() - t0, _cpu_seconds(pid) - cpu0
    ms = [m for s in scorers for m in s.query_ms[1 if s is scorers[0] else 0 :]]
    cpu_ms = cpu * 1000 / max(1, len(ms))
    return {
        "queries": len(ms),
        "calls": calls,
        "query_ms": {
            "p50": round(float(np.percentile(ms, 50)), 1),
            "p95": round(float(np.percentile(ms, 95)), 1),
        },
        "cpu_ms_per_query": round(cpu_ms, 1),
        "cpu_share_at_calls": round(calls * cpu_ms / 1000, 3),
        "wall_s": round(wall, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.lm_eot_cost", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("out/corpus/test/web"))
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.queries < 1 or not 1 <= a.calls <= 16:
        print("error: --queries must be >= 1 and --calls within [1, 16]", file=sys.stderr)
        return 2
    r = run(a.data, a.queries, a.calls)
    q, share = r["query_ms"], r["cpu_share_at_calls"] * 100
    print(
        f"{r['queries']} queries from {r['calls']} calls: {q['p50']} / {q['p95']} ms p50/p95, server CPU "
        f"{r['cpu_ms_per_query']} ms per query -> {share:.1f} % of one core at {r['calls']} calls with one "
        "interim per second each"
    )
    return emit(r, lambda _r: None, a.json)  # the summary is printed above


if __name__ == "__main__":
    sys.exit(main())
