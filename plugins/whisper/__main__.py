"""`python -m plugins.whisper serve`: the host speech engine, one per host, for every job process.

    python -m plugins.whisper serve --address unix:///run/parley/engine/stt.sock --device cpu
    python -m plugins.whisper serve --device cuda --max-batch 64      # a GPU host (CUDA 12 CTranslate2)
    python -m plugins.whisper serve --device cuda --backend torch     # a CUDA 13 GPU host (PyTorch)
    python -m plugins.whisper serve --model base                      # multilingual (Korean)

Prints `READY <address>` once the model is loaded and the socket listens. The secret, if any, comes from
PARLEY_STT_ENGINE_SECRET (never the command line, where `ps` shows it). SIGTERM/SIGINT close it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading

from plugins.local_socket import default_address

from .engine import SpeechEngine, SpeechEngineOptions
from .engine_server import SpeechServer, SpeechServerOptions
from .model import ModelOptions, WhisperModelError, make_runner
from .weights import default_model


def _language() -> str:
    """The worker's language settings, read the same way (the engine image carries no worker code)."""
    return os.environ.get("PARLEY_LANGUAGE") or "en"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m plugins.whisper", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve streaming-STT decodes on a Unix socket")
    s.add_argument(
        "--address", default=os.environ.get("PARLEY_STT_ENGINE_ADDRESS") or default_address("stt.sock")
    )
    s.add_argument(
        "--model",
        default=os.environ.get("PARLEY_STT_MODEL") or default_model(_language()),
        help="tiny.en, base (multilingual), a CTranslate2 folder or a downloaded name; default: "
        "PARLEY_STT_MODEL, else the language's default (tiny.en for English, base otherwise)",
    )
    s.add_argument(
        "--device", choices=("cpu", "cuda", "auto"), default=os.environ.get("PARLEY_STT_DEVICE", "cpu")
    )
    s.add_argument(
        "--backend",
        choices=("ctranslate2", "torch", "auto"),
        default=os.environ.get("PARLEY_STT_BACKEND", "ctranslate2"),
        help="ctranslate2 (faster-whisper), torch (a CUDA 13 GPU host), auto (torch on CUDA when "
        "CTranslate2 sees no GPU)",
    )
    s.add_argument("--compute-type", default="default")
    s.add_argument("--cpu-threads", type=int, default=0, help="threads per decode (0 = auto)")
    s.add_argument("--workers", type=int, default=2, help="batches that may run at once")
    s.add_argument("--max-batch", type=int, default=SpeechEngineOptions.max_batch)
    s.add_argument(
        "--supervised",
        action="store_true",
        help="run under a worker: stop when stdin closes (the worker closed it or died); ignore the "
        "SIGINT/SIGTERM sent to the worker's process group (the worker decides when the engine stops)",
    )
    return ap


async def serve(args: argparse.Namespace) -> None:
    runner = make_runner(
        ModelOptions(
            model=args.model,
            device=args.device,
            compute_type=args.compute_type,
            cpu_threads=args.cpu_threads,
            num_workers=args.workers,
            backend=args.backend,
        )
    )
    engine = SpeechEngine(runner, SpeechEngineOptions(max_batch=args.max_batch, workers=args.workers))
    server = SpeechServer(
        engine,
        SpeechServerOptions(address=args.address, secret=os.environ.get("PARLEY_STT_ENGINE_SECRET", "")),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if args.supervised:
            signal.signal(sig, signal.SIG_IGN)
        else:
            loop.add_signal_handler(sig, stop.set)
    if args.supervised:
        threading.Thread(target=_wait_stdin_closed, args=(loop, stop), daemon=True).start()
    try:
        await server.start()
        print(f"READY {args.address}", flush=True)
        await stop.wait()
    finally:
        await server.close()


def _wait_stdin_closed(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Under a worker: its end of our stdin closes when it stops us or dies (never an orphan)."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(4096):
            pass
    with contextlib.suppress(RuntimeError):  # the loop already ended
        loop.call_soon_threadsafe(stop.set)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=os.environ.get("PARLEY_LOG_LEVEL", "INFO"), stream=sys.stderr)
    try:
        asyncio.run(serve(args))
    except (WhisperModelError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
