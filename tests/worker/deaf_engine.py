"""Fault double: the real speech-engine server (plugins/whisper/engine_server.py) over a decoder that hangs.

It says `hello`, answers `capacity` and `ping`, and takes every decode, but no decode ever finishes: what a
host sees when the engine's decoder threads are wedged while its socket and event loop keep answering
(issue 66). Everything but the decoder is the product's own code.

    python -m tests.worker.deaf_engine --address unix:///tmp/x/stt.sock     # prints READY <address>
    python -m tests.worker.deaf_engine --busy --address ...    # decodes burn CPU and never finish

`--busy` is a starved host's engine instead: working as hard as it can, finishing nothing within the
keeper's window. The keeper must not restart that one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from typing import Any

from plugins.whisper.engine import SpeechEngine, SpeechEngineOptions
from plugins.whisper.engine_server import SpeechServer, SpeechServerOptions


class HangingDecoder:
    """Fault double for the Whisper runner: loads at once, then never returns from a decode."""

    model_name = "tiny.en"
    multilingual = False

    def __init__(self, busy: bool = False) -> None:
        self._never = threading.Event()
        self.busy = busy

    def load(self) -> None:
        pass

    def warmup(self, max_batch: int) -> None:
        pass

    def decode(self, audio: Any, request: Any) -> Any:
        while self.busy:
            sum(i * i for i in range(10_000))  # CPU, as a decode on a starved host uses it
        self._never.wait()

    def decode_batch(self, items: Any) -> Any:
        return self.decode(None, None)

    def close(self) -> None:
        pass


async def serve(address: str, busy: bool) -> None:
    engine = SpeechEngine(HangingDecoder(busy), SpeechEngineOptions(workers=1))  # type: ignore[arg-type]
    server = SpeechServer(engine, SpeechServerOptions(address=address))
    await server.start()
    print(f"READY {address}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--busy", action="store_true")
    args, _ = ap.parse_known_args(sys.argv[1:])
    asyncio.run(serve(args.address, args.busy))
