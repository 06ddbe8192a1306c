"""`python -m plugins.orpheus serve | synth | make-test-model` — the engine's command line.

With no model flags, serve and synth use the tiny random test model (built once under
out/orpheus-test-model), so everything runs on a laptop CPU. Bad input ends with one line on stderr and a
non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import warnings
from dataclasses import replace
from pathlib import Path

from plugins.local_socket import default_address, read_secret

DEFAULT_TEST_MODEL = Path("out/orpheus-test-model")
DEFAULT_ADDRESS = default_address()  # $XDG_RUNTIME_DIR/parley/ or /tmp/parley-<uid>/, made 0700


def _fail(msg: str, code: int = 2) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


def _settings():  # type: ignore[no-untyped-def]
    """Flag defaults: the engine's own deployment variables (env or .env), never the worker's settings."""
    from plugins.orpheus.settings import engine_settings

    try:
        return engine_settings()
    except ValueError as e:  # one line naming the variable, exit code 2, no traceback
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """Model/backend flags shared by serve, synth and the benchmarks."""
    s = _settings()
    g = p.add_argument_group("engine")
    g.add_argument(
        "--backend", default=s.orpheus_backend, choices=["torch", "cuda", "trtllm", "openai", "standin"]
    )
    g.add_argument(
        "--test-model", default="", help="dir written by make-test-model (default: built on demand)"
    )
    g.add_argument(
        "--model-dir",
        default="",
        help="Orpheus checkpoint (torch/trtllm) or tokenizer dir (openai)",
    )
    g.add_argument("--snac-dir", default="", help="SNAC 24 kHz dir (config.json + pytorch_model.bin)")
    g.add_argument("--device", default=s.orpheus_device)
    g.add_argument(
        "--dtype",
        default="auto",
        help="auto = bfloat16 on a CUDA device, float32 on CPU; or a torch dtype name",
    )
    g.add_argument("--cpu-threads", type=int, default=1)
    g.add_argument("--max-streams", type=int, default=s.engine_max_streams)
    g.add_argument("--openai-base-url", default="")
    g.add_argument("--openai-model", default="orpheus")
    g.add_argument("--tokenizer-dir", default="", help="tokenizer.json dir if not in --model-dir")
    g.add_argument("--trtllm-runtime", default="pytorch", choices=["pytorch", "engine"])
    g.add_argument("--trtllm-max-batch", type=int, default=128)
    g.add_argument("--trtllm-kv-fp8", default="on", choices=["on", "off"])
    g.add_argument("--gpu-memory-fraction", type=float, default=0.85, help="trtllm KV cache share")
    g.add_argument("--cuda-max-seq", type=int, default=2048, help="cuda backend: ids per utterance")
    g.add_argument("--cuda-fp8", default="off", choices=["on", "off"], help="cuda backend: FP8 weights")
    g.add_argument(
        "--standin-speed",
        type=float,
        default=1.0,
        help="standin backend (benchmarks.tts --overhead): generation rate as a multiple of real time",
    )
    g.add_argument("--temperature", type=float, default=0.5)
    g.add_argument("--top-p", type=float, default=0.9)
    g.add_argument("--repetition-penalty", type=float, default=1.1)
    g.add_argument("--language", default=s.language, choices=["en", "ko"])


def engine_config_from_args(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from plugins.orpheus.engine.backends.base import Sampling
    from plugins.orpheus.engine.core import EngineOptions
    from plugins.orpheus.engine.factory import EngineConfig
    from plugins.orpheus.engine.text import TextOptions

    model_dir, snac_dir = args.model_dir, args.snac_dir
    if args.backend == "standin":
        snac_dir = snac_dir or "standin"
    if (not model_dir and args.backend in ("torch", "cuda", "openai")) or not snac_dir:
        root = Path(args.test_model) if args.test_model else ensure_test_model(DEFAULT_TEST_MODEL)
        model_dir = model_dir or str(root / "orpheus")
        snac_dir = snac_dir or str(root / "snac")
    sampling = Sampling(args.temperature, args.top_p, args.repetition_penalty)
    opts = EngineOptions(
        max_streams=args.max_streams, sampling=sampling, text=TextOptions(language=args.language)
    )
    cfg = EngineConfig(
        backend=args.backend,
        model_dir=model_dir,
        snac_dir=snac_dir,
        device=args.device,
        dtype=resolve_dtype(args.dtype, args.device),
        cpu_threads=args.cpu_threads,
        openai_base_url=args.openai_base_url,
        openai_model=args.openai_model,
        tokenizer_dir=args.tokenizer_dir,
        trtllm_runtime=args.trtllm_runtime,
        trtllm_max_batch=args.trtllm_max_batch,
        trtllm_kv_fp8=args.trtllm_kv_fp8 == "on",
        trtllm_free_gpu_memory_fraction=args.gpu_memory_fraction,
        cuda_max_seq=args.cuda_max_seq,
        cuda_fp8=args.cuda_fp8 == "on",
        standin_speed=args.standin_speed,
        engine=opts,
    )
    return cfg


def resolve_dtype(dtype: str, device: str) -> str:
    """A 3B model in float32 would not fit a MIG slice and runs at half speed: bf16 wherever CUDA is."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if device.startswith("cuda") else "float32"


def ensure_test_model(root: Path) -> Path:
    if not (root / "snac" / "pytorch_model.bin").is_file():
        from plugins.orpheus.engine.testmodel import make_test_model

        print(f"building the tiny random test model in {root} ...", file=sys.stderr)
        make_test_model(root)
    return root


# -- serve ------------------------------------------------------------------------------------------------
async def _serve(args: argparse.Namespace) -> int:
    from plugins.orpheus.engine.factory import build_engine
    from plugins.orpheus.server import EngineServer, ServerOptions

    if args.secret:
        return _fail("--secret shows in `ps`: use --secret-file or PARLEY_ENGINE_SECRET")
    secret = read_secret(args.secret_file)
    engine = build_engine(engine_config_from_args(args))
    server = EngineServer(
        engine, ServerOptions(address=args.address, secret=secret, http_port=args.http_port)
    )
    await server.start()
    print(f"ready {server.bound_address}", flush=True)
    stop = asyncio.Event()
    import signal

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()
    return 0


# -- synth ------------------------------------------------------------------------------------------------
def _write_wav(path: Path, pcm) -> None:  # type: ignore[no-untyped-def]
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), pcm, 24000, subtype="PCM_16")


async def _synth_one(engine, client, text: str, voice: str):  # type: ignore[no-untyped-def]
    import numpy as np

    if client is None:
        return await engine.synthesize(text, voice)
    from plugins.orpheus.client import EngineError

    stream = client.open_stream(voice=voice)
    await stream.push_text(text)
    await stream.end()
    pcm, final = await stream.collect()
    if final.type == "error":
        raise EngineError(final.code, str(final.data.get("message", "")))
    return np.frombuffer(pcm, dtype=np.int16)


async def _synth(args: argparse.Namespace) -> int:
    from plugins.orpheus.client import EngineClient, EngineError
    from plugins.orpheus.engine.text import TextError, speakable_pieces, validate_voice

    if args.text is None and not args.text_file:
        return _fail("give --text or --text-file")
    if args.text_file:
        try:
            lines = Path(args.text_file).read_text(encoding="utf-8").splitlines()
            texts = [json.loads(line) for line in lines if line.strip()]
        except (OSError, ValueError) as e:
            return _fail(f"cannot read {args.text_file}: {e}")
    else:
        texts = [args.text]
    try:
        validate_voice(args.voice, args.language)
    except TextError as e:
        return _fail(str(e))
    problems = []
    for i, text in enumerate(texts):  # refuse hostile text before loading any model
        try:
            if not isinstance(text, str):
                raise TextError("each line must be a JSON string")
            speakable_pieces(text)
        except TextError as e:
            problems.append(f"line {i + 1}: {e}" if len(texts) > 1 else str(e))
    if len(problems) == len(texts):
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return 2
    engine = client = None
    if args.address:
        client = EngineClient(args.address, read_secret(args.secret_file))
        try:
            await client.connect()
        except Exception as e:
            return _fail(f"cannot reach the engine at {args.address}: {e}")
    else:
        from plugins.orpheus.engine.factory import build_engine

        cfg = engine_config_from_args(args)
        engine = build_engine(replace(cfg, engine=replace(cfg.engine, max_streams=1)))
        await engine.start()
    out = Path(args.out)
    failures = 0
    try:
        for i, text in enumerate(texts):
            path = out if len(texts) == 1 and out.suffix == ".wav" else _numbered(out, i)
            try:
                if not isinstance(text, str):
                    raise TextError("each line must be a JSON string")
                speakable_pieces(text)
                pcm = await _synth_one(engine, client, text, args.voice)
                _write_wav(path, pcm)
                print(f"{path}: {pcm.size / 24000:.2f} s", file=sys.stderr)
            except (TextError, EngineError, RuntimeError) as e:
                failures += 1
                print(f"error: line {i + 1}: {e}" if len(texts) > 1 else f"error: {e}", file=sys.stderr)
    finally:
        if engine is not None:
            await engine.close()
        if client is not None:
            await client.close()
    return 1 if failures else 0


def _numbered(out: Path, i: int) -> Path:
    if out.suffix == ".wav":
        return out.with_name(f"{out.stem}-{i + 1:03d}.wav")
    return out / f"{i + 1:03d}.wav"


# -- main -------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m plugins.orpheus", description="Parley's Orpheus TTS engine"
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_serve = sub.add_parser("serve", help="run the engine server")
    p_serve.add_argument(
        "--address", default=DEFAULT_ADDRESS, help="unix:///path.sock or ws://127.0.0.1:PORT"
    )
    p_serve.add_argument("--secret", default="", help=argparse.SUPPRESS)  # refused: argv is public
    p_serve.add_argument(
        "--secret-file", default="", help="shared secret file (else PARLEY_ENGINE_SECRET; needed for ws://)"
    )
    p_serve.add_argument(
        "--http-port",
        type=int,
        default=_settings().engine_http_port,
        help="loopback /metrics /capacity /healthz",
    )
    add_engine_args(p_serve)
    p_synth = sub.add_parser("synth", help="synthesize text to WAV")
    p_synth.add_argument("--text")
    p_synth.add_argument("--text-file", help="one JSON string per line; one WAV per line")
    p_synth.add_argument("--out", default="out/synth.wav")
    p_synth.add_argument("--voice", default="tara")
    p_synth.add_argument(
        "--address", default="", help="use a running engine server instead of an in-process one"
    )
    p_synth.add_argument("--secret-file", default="", help="shared secret file (else PARLEY_ENGINE_SECRET)")
    add_engine_args(p_synth)
    p_make = sub.add_parser("make-test-model", help="write the tiny random Orpheus + SNAC to DIR")
    p_make.add_argument("dir")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    logging.basicConfig(level=logging.INFO if args.cmd == "serve" else logging.WARNING, stream=sys.stderr)
    for noisy in ("transformers", "httpx", "websockets"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        if args.cmd == "make-test-model":
            from plugins.orpheus.engine.testmodel import make_test_model

            print(make_test_model(args.dir))
            return 0
        if args.cmd == "serve":
            return asyncio.run(_serve(args))
        return asyncio.run(_synth(args))
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError) as e:
        return _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)


if __name__ == "__main__":
    sys.exit(main())
