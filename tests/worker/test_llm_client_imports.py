"""The job process's LLM client is ready before the first call: a streamed request imports nothing new.

The OpenAI client loads its chat resources, its streaming helpers and anyio's asyncio backend on the first
request. Inside a call that import runs on the call's event loop while the caller waits for the first reply
(the loop monitor saw 120-200 ms blocks per module with four calls starting). Checked in a fresh
interpreter against the real embedded LLM.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import asyncio, sys
from worker.pipeline import llm_client
from worker.settings import load_settings

client = llm_client(load_settings(), sys.argv[1])
before = set(sys.modules)

async def main():
    stream = await client.chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, stream=True
    )
    async for _ in stream:
        pass

asyncio.run(main())
watched = ("openai", "anyio", "jiter", "httpx")
late = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in watched)
print("LATE", late)
"""


@pytest.mark.slow
def test_a_streamed_request_imports_no_module_the_client_did_not_load(embedded_llm_url: str) -> None:
    res = subprocess.run(
        [sys.executable, "-c", PROBE, embedded_llm_url], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("LATE")]
    assert line == "LATE []", line
