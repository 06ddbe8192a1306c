"""Start-up cost of the cuda generator's compiled admission pass, on any device.

    python -m benchmarks.prefill_compile [--layers 28] [--whole-pass]

Warms every admission shape of a tiny-width model with the real layer count (the compile's cost follows the
graph's length, not its width) and prints the seconds and the number of compiles. `--whole-pass` compiles
the whole pass at once, as the first try did, for comparison.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch._dynamo.utils import counters

from plugins.orpheus.engine.cuda.generator import BatchGenerator, GeneratorOptions
from plugins.orpheus.engine.cuda.model import LlamaShape, OrpheusLlama


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--layers", type=int, default=28)
    p.add_argument("--whole-pass", action="store_true", help="compile the whole pass, not one layer")
    args = p.parse_args(argv)
    shape = LlamaShape(hidden_size=64, intermediate_size=128, layers=args.layers, heads=6, kv_heads=2)
    model = OrpheusLlama.random(shape, torch.float32, "cpu", seed=0)
    opts = GeneratorOptions(rows=32, max_seq=512, attention="sdpa", graph_mode="record", compile_prefill=True)
    gen = BatchGenerator(model, opts)
    if args.whole_pass:
        model.compile_prefill(False)
        gen._prefill = torch.compile(gen._prefill, dynamic=True)  # type: ignore[method-assign]
    t = time.perf_counter()
    with gen._device():
        gen._pf_rows.fill_(gen.scratch)
        gen._warm_prefill()
    print(
        f"{args.layers} layers, {'whole pass' if args.whole_pass else 'one layer'} compiled: "
        f"{len(gen.prefill_shapes())} admission shapes warmed in {time.perf_counter() - t:.1f} s, "
        f"{counters['stats'].get('unique_graphs', 0)} compiles"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
