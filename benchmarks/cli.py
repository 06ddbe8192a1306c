"""The shared end of every benchmark's `main()`: one-line errors, the table, the JSON file (DESIGN §6); and
the percentiles every report gives."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

Table = Callable[[dict[str, Any]], None]


def write_json(path: str | Path, report: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2, ensure_ascii=False))


def emit(report: dict[str, Any], print_table: Table, json_path: str | Path | None) -> int:
    """Print the readable table and, with `--json PATH`, write the report there; the exit code (2 when the
    JSON cannot be written, said in one line)."""
    print_table(report)
    if json_path:
        try:
            write_json(json_path, report)
        except OSError as e:
            return fail(OSError(f"cannot write {json_path}: {e.strerror or e}"), 2)
    return 0


def print_json(report: dict[str, Any]) -> None:
    """The table of a benchmark whose report is its table."""
    print(json.dumps(report, indent=2))


def pct(values: Sequence[float | None], q: float, digits: int = 1) -> float | None:
    """The q-th percentile of the values that are there (None skipped), rounded; None when none is."""
    vals = [v for v in values if v is not None]
    return round(float(np.percentile(vals, q)), digits) if vals else None


def percentiles(
    values: Sequence[float | None], qs: Sequence[int] = (50, 95), digits: int = 1
) -> dict[str, float | None]:
    """{"p50": …, "p95": …} (or the percentiles `qs` name), as every benchmark's JSON gives them."""
    return {f"p{q}": pct(values, q, digits) for q in qs}


def fail(err: BaseException, code: int = 1) -> int:
    """Say what went wrong in one line on stderr (never a traceback) and return the exit code."""
    first = str(err).strip().splitlines()
    print(f"error: {first[0] if first else type(err).__name__}", file=sys.stderr)
    return code
