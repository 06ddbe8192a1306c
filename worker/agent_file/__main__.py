"""Agent-file commands.

    python -m worker.agent_file check FILE      validate an agent file (or a `module:callable` entry point)
    python -m worker.agent_file phrases FILE    build the file's own lines into its phrase-cache folder
    python -m worker.agent_file say FILE TEXT   write TEXT in the agent's CPU voice to a WAV, read with its
                                                pronunciations (--as-written: without them), to listen to

`check` prints `ok: NAME` and exits 0, or prints the one-line error and exits 1. Unset environment
variables that the file's tool headers name are reported as a warning (they are read when the worker runs),
and listed pronunciations the agent's CPU voice already says as respelled as a note.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from ..agent import AgentOptions, ParleyAgent
from ..settings import SettingsError, get_settings
from .entry import AgentEntryError, make_user_agent
from .runtime import check_tool_env, load_served_agent
from .spec import AgentFileError, AgentSpec


def check(value: str) -> tuple[int, str]:
    try:
        served = load_served_agent(value)
    except (AgentFileError, AgentEntryError) as e:
        return 1, str(e)
    if served is None:
        return 1, "nothing to check: give an agent file or package.module:callable"
    if served.entry:
        try:
            own = make_user_agent(served.entry)
        except AgentEntryError as e:
            return 1, str(e)
        try:  # what the first call would refuse: a developer's agent Parley cannot serve (worker/agent.py)
            ParleyAgent(AgentOptions(), own)
        except ValueError as e:
            return 1, f"agent entry {served.entry!r}: {e}"
    if served.spec is None:
        return 0, f"ok: {served.entry}"
    try:
        check_tool_env(served.spec, get_settings().tool_env_prefix)
    except SettingsError as e:
        return 1, str(e)
    unset = sorted({n for t in served.spec.http_tools for n in t.env_names() if n not in os.environ})
    note = f" (warning: environment variable not set: {', '.join(unset)})" if unset else ""
    if served.spec.pronunciations:
        note += pronunciation_note(served.spec)
    return 0, f"ok: {served.spec.name}{note}"


def pronunciation_note(spec: AgentSpec) -> str:
    """Which listed words the agent's CPU voice already says as respelled: the list only makes the voice read
    those syllable by syllable (benchmarks/RESULTS.md, Pronunciations)."""
    from plugins.cpu_voice.voice import CpuVoiceError, open_voice
    from plugins.pronunciation import read_alike
    from worker.settings import load_settings

    from .runtime import apply_agent

    try:
        settings = apply_agent(load_settings(), spec)
        voice = settings.effective_cpu_voice
        alike = read_alike(settings.tts_pronunciation_list, open_voice(voice).phonemes)
    except (CpuVoiceError, SettingsError) as e:
        return f" (warning: pronunciations not compared with the CPU voice: {str(e).splitlines()[0]})"
    if not alike:
        return ""
    return (
        f" (note: {voice} already says {', '.join(alike)} as respelled; their respellings only chop them up)"
    )


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


def say(file: Path, text: str, out: Path, as_written: bool) -> int:
    """TEXT as the agent's CPU voice says it, with the file's and the setting's pronunciations: how an owner
    hears whether a respelling says a name right before a caller does."""
    import soundfile as sf

    from caches.builder import synthesize_pcm
    from plugins.cpu_voice import CpuVoiceTTS
    from plugins.cpu_voice.voice import CpuVoiceError
    from plugins.pronunciation import Pronunciations
    from worker.settings import load_settings

    from .runtime import apply_agent
    from .spec import load_agent_file

    try:
        if not text.strip():
            raise AgentFileError("nothing to say: TEXT is empty")
        settings = apply_agent(load_settings(), load_agent_file(file))
        said = Pronunciations() if as_written else settings.tts_pronunciation_list
        voice = CpuVoiceTTS(voice=settings.effective_cpu_voice, pronunciations=said)
        pcm = asyncio.run(synthesize_pcm(voice, text))
        out.parent.mkdir(parents=True, exist_ok=True)
        sf.write(out, pcm, voice.sample_rate)
    except (AgentFileError, SettingsError, CpuVoiceError, OSError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    print(f"{settings.effective_cpu_voice} read: {said.speak(' '.join(text.split()))}")
    print(f"wrote {out} ({len(pcm) / voice.sample_rate:.1f} s)")
    return 0


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
    v = sub.add_parser("say", help="write a line in the agent's CPU voice, with its pronunciations, to a WAV")
    v.add_argument("file", type=Path, help="agent file (YAML)")
    v.add_argument("text", help="what to say, e.g. a line with a listed name")
    v.add_argument("--out", type=Path, default=Path("out/say.wav"), help="WAV to write (default out/say.wav)")
    v.add_argument("--as-written", action="store_true", help="without the pronunciation list, to compare")
    args = ap.parse_args(argv)
    if args.cmd == "say":
        return say(args.file, args.text, args.out, args.as_written)
    if args.cmd == "phrases":
        return build_phrases(args.file, args.dir, args.backend, args.voice, args.json)
    code, line = check(args.file)
    print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
