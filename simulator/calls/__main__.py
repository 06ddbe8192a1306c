"""python -m simulator.calls NAME --out DIR: render a scripted call (simulator/calls/NAME.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import render, spec_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulator.calls", description=__doc__)
    ap.add_argument("name", help="a call spec in simulator/calls/, e.g. reschedule")
    ap.add_argument("--out", required=True, help="folder for the WAVs and turns.json")
    args = ap.parse_args(argv)
    try:
        out = render(spec_path(args.name), Path(args.out))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
