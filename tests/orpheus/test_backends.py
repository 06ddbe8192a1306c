"""Token backends behind the one async interface: torch (CPU), openai (loopback HTTP), trtllm (GPU only)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import Sampling, token_stream
from plugins.orpheus.engine.backends.openai_backend import (
    OpenAIBackend,
    OpenAIBackendOptions,
    parse_custom_tokens,
)
from plugins.orpheus.engine.backends.torch_backend import TorchBackend, TorchBackendOptions
from plugins.orpheus.engine.core import EngineOptions, OrpheusEngine
from plugins.orpheus.engine.snac_decoder import SnacDecoder, load_snac
from plugins.orpheus.engine.text import prompt_ids
from tests.orpheus.scripted import random_frames


def assert_valid_positions(tokens: list[int]) -> None:
    for i, t in enumerate(tokens):
        if t == ids.END_OF_SPEECH:
            assert i % 7 == 0, "stop only at a frame boundary"
            continue
        p = i % 7
        assert ids.AUDIO_BASE + 4096 * p <= t < ids.AUDIO_BASE + 4096 * (p + 1)


async def test_torch_backend_streams_position_masked_ids(test_model: Path) -> None:
    backend = TorchBackend(TorchBackendOptions(str(test_model / "orpheus")))
    await backend.start()
    prompt = prompt_ids("tara", "Hello there.", backend.encode)
    got = [t async for t in token_stream(backend, prompt, 70, Sampling(seed=3))]
    assert 0 < len(got) <= 70
    assert_valid_positions(got)
    again = [t async for t in token_stream(backend, prompt, 70, Sampling(seed=3))]
    assert again == got, "seeded sampling is reproducible"
    # leaving the iterator early cancels the request
    async for _ in token_stream(backend, prompt, 700, slot=1):
        break
    await asyncio.sleep(0.05)
    assert backend.active == 0
    await backend.close()


def test_custom_token_text_parsing() -> None:
    assert parse_custom_tokens("<custom_token_10><custom_token_4106> <custom_token_2>") == [
        ids.CUSTOM_BASE + 10,
        ids.CUSTOM_BASE + 4106,
        ids.CUSTOM_BASE + 2,
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _completions_server(script: list[int], seen: list[dict[str, Any]], fail: bool = False):  # type: ignore[no-untyped-def]
    """A loopback stand-in for a vLLM completions endpoint: streams `<custom_token_N>` text."""

    async def completions(request: web.Request) -> web.StreamResponse:
        seen.append(await request.json())
        if fail:
            return web.Response(status=500, text="model exploded\nsecond line")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(0, len(script), 5):
            text = "".join(f"<custom_token_{t - ids.CUSTOM_BASE}>" for t in script[i : i + 5])
            chunk = {"choices": [{"index": 0, "text": text, "finish_reason": None}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(
            b'data: {"choices":[{"index":0,"text":"","finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        )
        return resp

    app = web.Application()
    app.add_routes([web.post("/v1/completions", completions)])
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("fail", [False, True])
async def test_openai_backend_through_the_engine(test_model: Path, fail: bool) -> None:
    seen: list[dict[str, Any]] = []
    runner, url = await _completions_server(random_frames(5), seen, fail)
    backend = OpenAIBackend(OpenAIBackendOptions(base_url=url, tokenizer_dir=str(test_model / "orpheus")))
    engine = OrpheusEngine(
        backend, SnacDecoder(load_snac(test_model / "snac")), EngineOptions(trim_leading_silence=False)
    )
    await engine.start()
    if fail:
        with pytest.raises(RuntimeError, match="HTTP 500") as info:
            await engine.synthesize("Hello there.")
        assert "\n" not in str(info.value)
    else:
        pcm = await engine.synthesize("Hello there.")
        assert pcm.size == 5 * ids.FRAME_SAMPLES and np.abs(pcm).max() > 0
    body = seen[0]
    assert body["prompt"][0] == ids.START_OF_HUMAN and body["prompt"].count(ids.BOS) == 1
    assert body["prompt"][-1] == ids.START_OF_SPEECH and body["stop_token_ids"] == [ids.END_OF_SPEECH]
    assert body["stream"] is True and body["max_tokens"] % 7 == 0
    await engine.close()
    await runner.cleanup()


@pytest.mark.gpu
@pytest.mark.parametrize("logits_mask", ["per_request", "batched"])
async def test_trtllm_backend_on_a_tiny_model(tmp_path: Path, logits_mask: str) -> None:
    pytest.importorskip("tensorrt_llm")
    from plugins.orpheus.engine.backends.trtllm_backend import TrtLlmBackend, TrtLlmOptions
    from plugins.orpheus.engine.testmodel import TestModelOptions, make_test_model

    # head size 64 (TensorRT-LLM's attention kernels support 64/128, not the CPU fixture's 16)
    root = make_test_model(tmp_path, TestModelOptions(hidden_size=128, heads=2, kv_heads=1))
    backend = TrtLlmBackend(
        TrtLlmOptions(
            model_dir=str(root / "orpheus"),
            kv_cache_fp8=False,
            max_batch_size=8,
            max_seq_len=1024,
            logits_mask=logits_mask,
        )
    )
    await backend.start()
    prompt = prompt_ids("tara", "Hello there.", backend.encode)
    got = [t async for t in token_stream(backend, prompt, 140, Sampling(seed=1))]
    assert 0 < len(got) <= 140
    assert_valid_positions(got)
    await backend.close()
