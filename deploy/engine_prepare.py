"""Make the engine's weights and FP8 TensorRT-LLM engine ready in the model cache volume, once.

Runs before the engine starts (the pod's `engine-prepare` init container, or the image entrypoint):

1. fetch the Orpheus checkpoint (tokenizer included) and the SNAC decoder into `<cache>/hf/<repo>`;
2. build the FP8 engine with the deploy/orpheus build step into `<cache>/engines/<key>`, where the key
   names the GPU kind (an engine only runs on the GPU architecture it was built for) and the build inputs.

Both steps are skipped when their completion marker exists, so restarts cost nothing. Several pods may
share one cache volume: an exclusive file lock makes one of them do the work while the others wait.

    python deploy/engine_prepare.py --cache-dir /models --engine-key h100-3g.40gb
    python deploy/engine_prepare.py --cache-dir /models --fetch-only
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("parley.deploy")

DONE_MARKER = ".parley-complete"
# the flags deploy/orpheus/build_engine.py takes (tests/deploy parse this very command with its parser)
DEFAULT_BUILD_COMMAND = " ".join(
    (
        "python deploy/orpheus/build_engine.py",
        "--model {checkpoint} --out {engine_dir} --max-batch {max_batch} --runtime {runtime}",
    )
)


@dataclass(frozen=True)
class PrepareOptions:
    cache_dir: Path
    checkpoint_repo: str = "canopylabs/orpheus-3b-0.1-ft"
    snac_repo: str = "hubertsiuzdak/snac_24khz"
    engine_key: str = "default"  # GPU kind + slice, e.g. "h100-3g.40gb"
    max_batch: int = 32  # streams the engine is built for; matches the engine's admission limit
    build_command: str = (
        DEFAULT_BUILD_COMMAND  # placeholders: {checkpoint} {engine_dir} {max_batch} {runtime}
    )
    runtime: str = "pytorch"  # TensorRT-LLM runtime the build is for: "pytorch" (FP8 checkpoint) | "engine"
    fetch_only: bool = False
    lock_timeout_s: float = 3 * 3600.0  # a first build can take tens of minutes; waiters give up after this
    lock_poll_s: float = 2.0


@dataclass(frozen=True)
class PreparedPaths:
    checkpoint: Path
    snac: Path
    engine_dir: Path | None


def repo_dir(cache_dir: Path, repo: str) -> Path:
    return cache_dir / "hf" / repo.replace("/", "--")


def engine_dir(opts: PrepareOptions) -> Path:
    """Engine folder for these build inputs; a changed command or batch size gives a fresh build."""
    digest = hashlib.sha256(
        f"{opts.checkpoint_repo}|{resolved_command(opts)}|{opts.max_batch}".encode()
    ).hexdigest()
    return opts.cache_dir / "engines" / f"{opts.engine_key}-{digest[:12]}"


def resolved_command(opts: PrepareOptions) -> str:
    """The build command with the runtime filled in ({checkpoint} etc. are filled per build by run_build)."""
    return opts.build_command.replace("{runtime}", opts.runtime)


def is_done(path: Path) -> bool:
    return (path / DONE_MARKER).is_file()


def mark_done(path: Path) -> None:
    (path / DONE_MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n")


@contextmanager
def exclusive(lock_path: Path, timeout_s: float, poll_s: float = 2.0) -> Iterator[None]:
    """Hold an exclusive lock shared through the cache volume, polling so a stuck holder cannot hang us."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with open(lock_path, "a+") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{lock_path} still held after {timeout_s:.0f} s") from None
                time.sleep(poll_s)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def hf_fetch(repo: str, dest: Path) -> None:
    """Download a model repository into `dest` (needs HF_TOKEN for gated repositories)."""
    from huggingface_hub import snapshot_download

    snapshot_download(repo_id=repo, local_dir=str(dest), token=os.environ.get("HF_TOKEN") or None)


def run_build(command: str, checkpoint: Path, out: Path, max_batch: int) -> None:
    argv = [
        part.format(checkpoint=checkpoint, engine_dir=out, max_batch=max_batch)
        for part in shlex.split(command)
    ]
    log.info("building engine", extra={"engine_dir": str(out)})
    subprocess.run(argv, check=True)


def prepare(
    opts: PrepareOptions,
    fetch: Callable[[str, Path], None] = hf_fetch,
    build: Callable[[str, Path, Path, int], None] = run_build,
) -> PreparedPaths:
    """Fetch and build whatever is missing; return where the engine should load from."""
    checkpoint = repo_dir(opts.cache_dir, opts.checkpoint_repo)
    snac = repo_dir(opts.cache_dir, opts.snac_repo)
    target = None if opts.fetch_only else engine_dir(opts)
    with exclusive(opts.cache_dir / ".prepare.lock", opts.lock_timeout_s, opts.lock_poll_s):
        for repo, dest in ((opts.checkpoint_repo, checkpoint), (opts.snac_repo, snac)):
            if is_done(dest):
                continue
            log.info("fetching weights", extra={"repo": repo})
            dest.mkdir(parents=True, exist_ok=True)
            fetch(repo, dest)
            mark_done(dest)
        if target is not None and not is_done(target):
            partial = target.with_name(target.name + ".partial")
            if partial.exists():
                _remove_tree(partial)
            partial.mkdir(parents=True)
            build(resolved_command(opts), checkpoint, partial, opts.max_batch)
            mark_done(partial)
            if target.exists():
                _remove_tree(target)
            partial.rename(target)
    return PreparedPaths(checkpoint=checkpoint, snac=snac, engine_dir=target)


def _remove_tree(path: Path) -> None:
    for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
    path.rmdir()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch Orpheus/SNAC weights and build the FP8 engine, once.")
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--checkpoint-repo", default=PrepareOptions.checkpoint_repo)
    parser.add_argument("--snac-repo", default=PrepareOptions.snac_repo)
    parser.add_argument("--engine-key", default=PrepareOptions.engine_key)
    parser.add_argument("--max-batch", type=int, default=PrepareOptions.max_batch)
    parser.add_argument("--build-command", default=DEFAULT_BUILD_COMMAND)
    parser.add_argument("--runtime", default=PrepareOptions.runtime, choices=["pytorch", "engine"])
    parser.add_argument("--fetch-only", action="store_true")
    parser.add_argument(
        "--print-env", action="store_true", help="print the resolved paths as shell assignments"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.max_batch < 1:
        print("engine_prepare: --max-batch must be >= 1", file=sys.stderr)
        return 2
    opts = PrepareOptions(
        cache_dir=args.cache_dir,
        checkpoint_repo=args.checkpoint_repo,
        snac_repo=args.snac_repo,
        engine_key=args.engine_key,
        max_batch=args.max_batch,
        build_command=args.build_command,
        runtime=args.runtime,
        fetch_only=args.fetch_only,
    )
    try:
        paths = prepare(opts)
    except (OSError, TimeoutError, subprocess.CalledProcessError) as err:
        print(f"engine_prepare: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # download errors come in many library-specific types
        print(f"engine_prepare: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if args.print_env:
        print(f"PARLEY_ORPHEUS_CHECKPOINT={shlex.quote(str(paths.checkpoint))}")
        print(f"PARLEY_SNAC_DIR={shlex.quote(str(paths.snac))}")
        print(f"PARLEY_TRTLLM_ENGINE_DIR={shlex.quote(str(paths.engine_dir or ''))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
