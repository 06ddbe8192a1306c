"""Token generation through a remote OpenAI-compatible completions endpoint serving Orpheus (e.g. vLLM).

For a laptop worker with the model on a remote GPU. The prompt is sent as ids (no re-tokenising, so no second
BOS); the stream's text pieces are `<custom_token_N>` strings, turned back into ids = 128 256 + N (or the
server's own `token_ids` when it returns them). Ids from all requests are coalesced into one engine push per
loop pass. Cancelling a request closes its HTTP response, which aborts it on the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends._delivery import Coalescer
from plugins.orpheus.engine.backends.base import GenRequest, TokenBackend

log = logging.getLogger("parley.orpheus.openai")
_CUSTOM = re.compile(r"<custom_token_(\d+)>")


@dataclass(frozen=True)
class OpenAIBackendOptions:
    base_url: str = ""  # http://host:port/v1
    model: str = "orpheus"
    api_key: str = ""
    tokenizer_dir: str = ""  # local tokenizer.json (prompt ids are built here)
    timeout_s: float = 30.0
    max_connections: int = 256


def parse_custom_tokens(text: str) -> list[int]:
    return [ids.CUSTOM_BASE + int(n) for n in _CUSTOM.findall(text)]


class OpenAIBackend(TokenBackend):
    name = "openai"

    def __init__(self, options: OpenAIBackendOptions) -> None:
        super().__init__()
        if not options.base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai backend needs an http(s) base URL (got {options.base_url!r})")
        self.options = options
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._out = Coalescer()
        self._session: Any = None

    def bind(self, sink: Any) -> None:
        super().bind(sink)
        self._out.sink = sink

    async def start(self) -> None:
        import aiohttp

        from plugins.orpheus.engine.tokenizer import load_encoder

        self._encode = load_encoder(self.options.tokenizer_dir)
        headers = {"Authorization": f"Bearer {self.options.api_key}"} if self.options.api_key else {}
        self._session = aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self.options.timeout_s, sock_read=self.options.timeout_s
            ),
            connector=aiohttp.TCPConnector(limit=self.options.max_connections),
        )

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    @property
    def active(self) -> int:
        return len(self._tasks)

    def submit(self, request: GenRequest) -> None:
        self._tasks[request.slot] = asyncio.create_task(self._run(request), name=f"openai-{request.slot}")

    def _body(self, req: GenRequest) -> dict[str, Any]:
        sp = req.sampling
        body: dict[str, Any] = {
            "model": self.options.model,
            "prompt": req.prompt_ids,
            "max_tokens": req.max_tokens,
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "repetition_penalty": sp.repetition_penalty,
            "stop_token_ids": [ids.END_OF_SPEECH],
            "skip_special_tokens": False,
            "stream": True,
        }
        if sp.seed is not None:
            body["seed"] = sp.seed
        return body

    async def _run(self, req: GenRequest) -> None:
        reason, error = "length", None
        url = self.options.base_url.rstrip("/") + "/completions"
        try:
            async with self._session.post(url, json=self._body(req)) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200].replace("\n", " ")
                    raise RuntimeError(f"HTTP {resp.status}: {text}")
                async for raw in resp.content:
                    line = raw.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        break
                    choice = json.loads(data)["choices"][0]
                    toks = choice.get("token_ids") or parse_custom_tokens(choice.get("text") or "")
                    self._out.add(req.slot, toks)
                    if ids.END_OF_SPEECH in toks or choice.get("finish_reason") == "stop":
                        reason = "stop"
        except asyncio.CancelledError:
            return
        except Exception as e:
            log.warning("completions request failed: %s", e)
            reason, error = "error", f"remote generator failed: {e}"
        self._out.flush()
        if self._tasks.pop(req.slot, None) is not None and self.sink:
            self.sink.finish(req.slot, reason, error)

    def cancel(self, slot: int) -> None:
        task = self._tasks.pop(slot, None)
        if task is None:
            return
        task.cancel()
        self._out.drop(slot)
        if self.sink:
            self.sink.finish(slot, "cancelled")

    async def close(self) -> None:
        for slot in list(self._tasks):
            self.cancel(slot)
        if self._session is not None:
            await self._session.close()
