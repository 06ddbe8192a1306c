"""`python -m worker.agents check FILE`: validate an agent file (or a `module:callable` entry point).

Prints `ok: NAME` and exits 0, or prints the one-line error and exits 1. Unset environment variables that
the file's tool headers name are reported as a warning (they are read when the worker runs).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..settings import SettingsError, get_settings
from .entry import AgentEntryError
from .runtime import check_tool_env, load_served_agent
from .spec import AgentFileError


def check(value: str) -> tuple[int, str]:
    try:
        served = load_served_agent(value)
    except (AgentFileError, AgentEntryError) as e:
        return 1, str(e)
    if served is None:
        return 1, "nothing to check: give an agent file or package.module:callable"
    if served.spec is None:
        return 0, f"ok: {served.entry}"
    try:
        check_tool_env(served.spec, get_settings().tool_env_prefix)
    except SettingsError as e:
        return 1, str(e)
    unset = sorted({n for t in served.spec.http_tools for n in t.env_names() if n not in os.environ})
    note = f" (warning: environment variable not set: {', '.join(unset)})" if unset else ""
    return 0, f"ok: {served.spec.name}{note}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m worker.agents", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="validate an agent file")
    c.add_argument("file", help="agent file (YAML) or package.module:callable")
    args = ap.parse_args(argv)
    code, line = check(args.file)
    print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
