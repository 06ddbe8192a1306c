"""Agent-file commands.

    python -m worker.agent_file check FILE      validate an agent file (or a `module:callable` entry point)
    python -m worker.agent_file phrases FILE    build the file's own lines into its phrase-cache folder

`check` prints `ok: NAME` and exits 0, or prints the one-line error and exits 1. Unset environment
variables that
the file's tool headers name are reported as a warning (they are read when the worker runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

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


def build_phrases(file: Path, dir_: Path, backend: str, voice: str | None, json_path: Path | None) -> int:
    """The agent's greeting, fillers and fixed lines, in its voice and language, under DIR/agents/NAME."""
    from caches.__main__ import CliError, print_report
    from caches.__main__ import build_phrases as build
    from caches.store import CacheStoreError
    from worker.settings import SettingsError, load_settings

    from .runtime import agent_cache_dir, agent_phrases, apply_agent
    from .spec import load_agent_file

    try:
        spec = load_agent_file(file)
        settings = apply_agent(load_settings(), spec)
        voice = voice or (settings.tts_voice if backend == "orpheus" else settings.effective_cpu_voice)
        out = agent_cache_dir(dir_, spec)
        said = settings.tts_pronunciation_list
        report = asyncio.run(build(agent_phrases(spec), voice, spec.language, out, backend, None, said))
    except (AgentFileError, SettingsError, CliError, CacheStoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return print_report(report, out, json_path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m worker.agent_file", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="validate an agent file")
    c.add_argument("file", help="agent file (YAML) or package.module:callable")
    p = sub.add_parser("phrases", help="build an agent file's own lines into its phrase cache")
    p.add_argument("file", type=Path, help="agent file (YAML)")
    p.add_argument("--dir", type=Path, default=Path("out/phrase-cache"), help="phrase-cache root")
    p.add_argument("--backend", choices=("cpu", "orpheus"), default="cpu")
    p.add_argument("--voice", default=None, help="voice (default: the agent's)")
    p.add_argument("--json", type=Path, default=None, help="write the build report as JSON here")
    args = ap.parse_args(argv)
    if args.cmd == "phrases":
        return build_phrases(args.file, args.dir, args.backend, args.voice, args.json)
    code, line = check(args.file)
    print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
