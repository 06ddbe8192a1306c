"""A Llama decoder for batched Orpheus decode: static slotted KV cache, RoPE with Llama-3 scaling, GQA.

gpt-fast-shaped: plain modules, no framework. The KV cache holds one row per concurrent request
(`rows × kv_heads × max_seq × head_dim` per layer); a decode step runs rows 0..B-1 at once, each at its own
position, so a batch is a prefix view of the cache and needs no gather. Decode attention is length-aware by
default: FlexAttention with a block mask built on the device from each row's position, so a row reads only
its own KV blocks (`attention="sdpa"` keeps the padded reference: every row reads up to `kv_len`;
`attention="triton"` is the split-KV kernel of decode_attention.py, the only one that reads an FP8 cache).
q/k/v and gate/up are single fused GEMMs; RoPE frequencies stay float32 whatever the weights' dtype. The LM
head keeps only the rows the engine can ever sample (7 × 4096 audio codes + the stop id: 28 673 of 156 940).
Same code on CPU (eager, tests) and CUDA (the generator captures it in graphs). Weights load from a Hugging
Face Llama checkpoint (safetensors) or start random at any shape (benchmarks).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from plugins.orpheus.engine import ids

HEAD_ROWS = ids.AUDIO_END - ids.AUDIO_BASE + 1  # 28 673: audio codes, then the stop id last
STOP_COLUMN = HEAD_ROWS - 1
KV_BLOCK = 128  # FlexAttention's KV block: a row reads ceil((pos + 1) / 128) blocks
ATTENTION_BACKENDS = ("flex", "sdpa", "triton")  # triton: decode_attention.py (split-KV, FP8 cache option)
PREFILL_SDPA = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


@dataclass(frozen=True)
class LlamaShape:
    vocab_size: int = ids.VOCAB_SIZE
    hidden_size: int = 3072
    intermediate_size: int = 8192
    layers: int = 28
    heads: int = 24
    kv_heads: int = 8
    rms_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling: dict[str, Any] = field(
        default_factory=lambda: {
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        }
    )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.heads

    @classmethod
    def from_hf_config(cls, path: str | Path) -> LlamaShape:
        c = json.loads(Path(path).read_text())
        if c.get("vocab_size", 0) < ids.VOCAB_SIZE:
            raise ValueError(f"model vocab {c.get('vocab_size')} < Orpheus {ids.VOCAB_SIZE}")
        return cls(
            vocab_size=c["vocab_size"],
            hidden_size=c["hidden_size"],
            intermediate_size=c["intermediate_size"],
            layers=c["num_hidden_layers"],
            heads=c["num_attention_heads"],
            kv_heads=c.get("num_key_value_heads") or c["num_attention_heads"],
            rms_eps=c.get("rms_norm_eps", 1e-5),
            # transformers 4 writes rope_theta + rope_scaling; transformers 5 one rope_parameters dict
            rope_theta=c.get("rope_theta") or (c.get("rope_parameters") or {}).get("rope_theta", 10000.0),
            rope_scaling=c.get("rope_scaling") or c.get("rope_parameters") or {},
        )


def rope_inv_freq(shape: LlamaShape) -> torch.Tensor:
    """Inverse frequencies, with Llama-3's long-context scaling when the config asks for it."""
    d = shape.head_dim
    inv = 1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    s = shape.rope_scaling
    if s.get("rope_type", s.get("type")) != "llama3":
        return inv.float()
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    mid = (1 - smooth) * scaled / factor + smooth * scaled
    is_mid = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(is_mid, mid, scaled).float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., T, heads, head_dim); cos/sin (..., T, 1, head_dim/2); HF Llama's rotate-half convention."""
    x1, x2 = x.float().chunk(2, dim=-1)
    out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return out.to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * self.weight.float()).to(x.dtype)


class Fp8Linear(nn.Module):
    """y = x Wᵀ with W in float8_e4m3fn and per-tensor scales (`torch._scaled_mm`, Hopper). GPU only."""

    weight_t: torch.Tensor
    w_scale: torch.Tensor

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        fp8 = torch.float8_e4m3fn
        w_scale = weight.float().abs().max().clamp(min=1e-12) / torch.finfo(fp8).max
        # transposed view of a row-major (out, in) tensor = the column-major operand _scaled_mm wants
        self.register_buffer("weight_t", (weight.float() / w_scale).to(fp8).t())
        self.register_buffer("w_scale", w_scale.reshape(()).float())
        self.out_dtype = weight.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fp8 = torch.float8_e4m3fn
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        x_scale = (x2.float().abs().max().clamp(min=1e-12) / torch.finfo(fp8).max).reshape(())
        xq = (x2.float() / x_scale).to(fp8)
        y = torch._scaled_mm(
            xq, self.weight_t, scale_a=x_scale, scale_b=self.w_scale, out_dtype=self.out_dtype
        )
        return y.reshape(*lead, -1)


class Attention(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        h, d = shape.hidden_size, shape.head_dim
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, d
        self.qkv_proj = nn.Linear(h, (shape.heads + 2 * shape.kv_heads) * d, bias=False)  # one GEMM
        self.o_proj = nn.Linear(shape.heads * d, h, bias=False)
        self.kv_head_index: torch.Tensor | None = None
        self.kv_scale: torch.Tensor | None = None  # (2, kv_heads) float32 when the cache is FP8

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lead = x.shape[:-1]
        nq, nkv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        q, k, v = self.qkv_proj(x).split((nq, nkv, nkv), dim=-1)
        q = q.reshape(*lead, self.heads, self.head_dim)
        k = k.reshape(*lead, self.kv_heads, self.head_dim)
        v = v.reshape(*lead, self.kv_heads, self.head_dim)
        return q, k, v

    def decode(
        self,
        x: torch.Tensor,  # (B, hidden): one token per cache row 0..B-1
        cache: tuple[torch.Tensor, torch.Tensor],
        rows: torch.Tensor,
        pos: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | BlockMask,  # SDPA: (B, 1, 1, L) bool; flex: its BlockMask; triton: (B,) lengths
        flex: Any = None,  # the (compiled on CUDA) flex_attention to call with a BlockMask
        kernel: str = "flex",  # the model's attention backend
    ) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, heads, d)
        b, rep = x.shape[0], self.heads // self.kv_heads
        # GQA packed as query length: the `rep` query heads sharing a KV head are that head's `rep` query
        # rows, so attention reads each KV block once per KV head, not once per query head (flex's own GQA
        # path on a one-id query runs its general kernel, one program per query head). Made 4-D by RoPE's
        # own output, not a view: Inductor's CPU flex template reads the buffer's shape.
        q = q.view(b, self.kv_heads, rep, self.head_dim)
        q = apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1))  # (B, kv_heads, rep, d)
        k = apply_rope(k, cos, sin)
        kc, vc = cache
        heads = self.kv_head_index
        assert heads is not None
        where = (rows[:, None], heads[None, :], pos[:, None])  # (B, kv_heads) cells at each row's position
        kc.index_put_(where, self._store(k, 0))
        vc.index_put_(where, self._store(v, 1))
        if kernel == "triton":  # split-KV over each row's own length (mask: the lengths)
            from plugins.orpheus.engine.cuda.decode_attention import decode_attention

            sc = self.kv_scale
            ks, vs = (sc[0], sc[1]) if sc is not None else (None, None)
            out = decode_attention(q, kc, vc, mask, ks, vs)  # type: ignore[arg-type]
        elif isinstance(mask, BlockMask):  # length-aware: every row reads only its own blocks
            out = flex(q, kc[:b], vc[:b], block_mask=mask)  # (B, kv_heads, rep, d)
        else:
            kv_len = mask.shape[-1]
            keys, vals = kc[:b, :, :kv_len], vc[:b, :, :kv_len]  # (B, kv_heads, L, d): views, no gather
            out = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)  # every query row: one key
        # (B, kv_heads, rep, d) → heads in Llama's order: query head h reads KV head h // rep
        return self.o_proj(out.reshape(b, self.heads * self.head_dim))

    def _store(self, x: torch.Tensor, which: int) -> torch.Tensor:
        """Keys (0) or values (1), (..., kv_heads, head_dim), as the cache holds them (FP8: ÷ its scale)."""
        if self.kv_scale is None:
            return x
        from plugins.orpheus.engine.cuda.decode_attention import to_fp8

        return to_fp8(x, self.kv_scale[which])

    def prefill(
        self,
        x: torch.Tensor,  # (N, T, hidden): N prompts, right-padded to T, positions 0..T-1
        cache: tuple[torch.Tensor, torch.Tensor],
        rows: torch.Tensor,  # (N,) cache rows
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> torch.Tensor:
        n, t = x.shape[:2]
        q, k, v = self._qkv(x)  # (N, T, heads, d)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        kc, vc = cache
        # the padding past a prompt's end is written too: decode overwrites position p before any row reads it
        kc[rows, :, :t] = self._store(k, 0).transpose(1, 2)
        vc[rows, :, :t] = self._store(v, 1).transpose(1, 2)
        k, v = (
            k.transpose(1, 2),
            v.transpose(1, 2),
        )  # (N, kv_heads, T, d): the prompt attends at full precision
        # flash (or math) only: cuDNN attention would build a new plan for every new prompt shape
        with sdpa_kernel(PREFILL_SDPA):
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(n, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        h, i = shape.hidden_size, shape.intermediate_size
        self.gate_up_proj = nn.Linear(h, 2 * i, bias=False)  # gate rows, then up rows: one GEMM
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_eps)
        self.mlp = MLP(shape)


def _prefill_layer(
    block: nn.Module,
    x: torch.Tensor,
    kc: torch.Tensor,
    vc: torch.Tensor,
    rows: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> torch.Tensor:
    """One block over a padded admission pass (its keys and values written into the cache)."""
    assert isinstance(block, Block)
    x = x + block.self_attn.prefill(block.input_layernorm(x), (kc, vc), rows, cos, sin)
    return x + block.mlp(block.post_attention_layernorm(x))


class OrpheusLlama(nn.Module):
    """Embedding + blocks + final norm + the restricted head; owns the KV cache once `allocate` ran."""

    inv_freq: torch.Tensor

    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.shape = shape
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_eps)
        self.head = nn.Linear(shape.hidden_size, HEAD_ROWS, bias=False)  # rows: audio codes, then stop
        self.register_buffer("inv_freq", rope_inv_freq(shape), persistent=False)
        self.caches: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.max_seq = self.cache_len = 0
        self.attention = "flex"  # or "sdpa": the padded reference path; or "triton": split-KV kernel
        self.kv_fp8 = False
        self.kv_scales = torch.ones(0)  # (layers, 2, kv_heads) once `allocate` ran
        self._flex: Any = flex_attention
        self._kv_limit = torch.zeros(0, dtype=torch.int64)  # per cache row: the last key position it reads
        self._prefill_layer: Any = _prefill_layer

    def set_attention(self, backend: str, compile_flex: bool | None = None) -> None:
        """Pick decode attention. FlexAttention is compiled on CUDA (its fused split-KV decode kernel); eager
        (a dense reference implementation) elsewhere unless `compile_flex` says otherwise."""
        if backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention backend {backend!r}: one of {', '.join(ATTENTION_BACKENDS)}")
        if self.kv_fp8 and backend != "triton":
            raise ValueError("an FP8 KV cache is read by attention='triton' only")
        self.attention = backend
        on_cuda = self.head.weight.device.type == "cuda"
        if backend == "flex" and (compile_flex if compile_flex is not None else on_cuda):
            # automatic dynamic shapes: the first batch shape compiles static, the next one once for every
            # batch (a static compile per bucket would also pass dynamo's recompile limit and fall back to
            # the dense eager implementation without a word)
            self._flex = torch.compile(flex_attention, fullgraph=True)
        else:
            self._flex = flex_attention

    def compile_prefill(self, on: bool = True) -> None:
        """Inductor-fuse the admission pass one layer at a time: every layer runs the same compiled code
        with its own weights, so the compile is one layer's graph (and its shape specialisations), not
        the whole model unrolled (CPU, Inductor's caches off: 24 admission shapes of a 28-layer model warm
        in 31.6 s this way, 177.6 s compiled whole; benchmarks/prefill_compile.py as of commit 31c8477)."""
        self._prefill_layer = torch.compile(_prefill_layer, dynamic=True) if on else _prefill_layer

    # -- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, model_dir: str | Path, dtype: torch.dtype, device: str) -> OrpheusLlama:
        """Load a Hugging Face Llama checkpoint (config.json + *.safetensors); keeps the used head rows."""
        from safetensors.torch import load_file

        d = Path(model_dir)
        shape = LlamaShape.from_hf_config(d / "config.json")
        files = sorted(d.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors in {d}")
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        with torch.device("meta"):
            model = cls(shape)
        ours: dict[str, torch.Tensor] = {}
        for name, t in state.items():
            if name.startswith("model."):
                ours[name[len("model.") :]] = t
        for i in range(shape.layers):  # fuse q/k/v and gate/up into one weight each (one GEMM each)
            a, m = f"layers.{i}.self_attn.", f"layers.{i}.mlp."
            ours[a + "qkv_proj.weight"] = torch.cat([ours.pop(a + f"{n}_proj.weight") for n in "qkv"])
            ours[m + "gate_up_proj.weight"] = torch.cat(
                [ours.pop(m + f"{n}_proj.weight") for n in ("gate", "up")]
            )
        lm = state.get("lm_head.weight", state["model.embed_tokens.weight"])  # tied in the tiny test model
        ours["head.weight"] = torch.cat(
            [lm[ids.AUDIO_BASE : ids.AUDIO_END], lm[ids.END_OF_SPEECH : ids.END_OF_SPEECH + 1]]
        )
        ours = {k: v for k, v in ours.items() if not k.endswith("rotary_emb.inv_freq")}
        model.load_state_dict(ours, strict=True, assign=True)
        model.inv_freq = rope_inv_freq(shape)  # off the meta device (recomputed in fp32 after the cast)
        return model.to(device=device, dtype=dtype).float_buffers()

    @classmethod
    def random(cls, shape: LlamaShape, dtype: torch.dtype, device: str, seed: int = 0) -> OrpheusLlama:
        """Random weights of any shape, made on the target device (speed needs no real weights)."""
        torch.manual_seed(seed)
        with torch.device(device):
            model = cls(shape)
        for p in model.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
        return model.to(dtype=dtype).float_buffers()

    def float_buffers(self) -> OrpheusLlama:
        """RoPE frequencies recomputed in float32 after any dtype cast: a bf16 round trip would put ~0.2 %
        error on them (over a radian of phase by position 1000)."""
        self.inv_freq = rope_inv_freq(self.shape).to(self.head.weight.device)
        return self.eval().requires_grad_(False)

    def use_fp8(self) -> None:
        """Swap every projection for an FP8 one (weights quantized per tensor). Needs a GPU with FP8 GEMMs."""
        for block in self.layers:
            assert isinstance(block, Block)
            for mod, names in (
                (block.self_attn, ("qkv_proj", "o_proj")),
                (block.mlp, ("gate_up_proj", "down_proj")),
            ):
                for n in names:
                    setattr(mod, n, Fp8Linear(getattr(mod, n).weight.data))

    def allocate(self, rows: int, max_seq: int, kv_fp8: bool = False) -> None:
        """The static KV cache: `rows` concurrent sequences of up to `max_seq` tokens. `kv_fp8`: entries in
        float8_e4m3fn ÷ a per-KV-head scale (1.0 until `set_kv_scales`), half the bytes a step reads."""
        s, p = self.shape, self.head.weight
        self.max_seq = max_seq
        self.kv_fp8 = kv_fp8
        dtype = torch.float8_e4m3fn if kv_fp8 else p.dtype
        self.cache_len = -(-max_seq // KV_BLOCK) * KV_BLOCK  # whole KV blocks (the tail is never read)
        self.caches = [
            tuple(  # type: ignore[misc]
                torch.zeros(rows, s.kv_heads, self.cache_len, s.head_dim, dtype=dtype, device=p.device)
                for _ in range(2)
            )
            for _ in range(s.layers)
        ]
        self._kv_limit = torch.zeros(rows, dtype=torch.int64, device=p.device)
        heads = torch.arange(s.kv_heads, device=p.device)
        self.kv_scales = torch.ones(s.layers, 2, s.kv_heads, dtype=torch.float32, device=p.device)
        for i, block in enumerate(self.layers):
            assert isinstance(block, Block)
            block.self_attn.kv_head_index = heads
            block.self_attn.kv_scale = self.kv_scales[i] if kv_fp8 else None
        limit = self._kv_limit

        def within(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
            return kv <= limit[b]

        self._mask_mod = within  # one function object for the model's life: compiled code is reused

    def set_kv_scales(self, scales: torch.Tensor) -> None:
        """Per-layer, per-KV-head FP8 scales (layers, 2 = keys/values, kv_heads), e.g. max |k| / 448 from a
        calibration prompt; a per-tensor scale is one value repeated. Set before any prompt is admitted."""
        self.kv_scales.copy_(scales.to(self.kv_scales))

    def kv_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for pair in self.caches for t in pair)

    # -- forward --------------------------------------------------------------------------------------
    def _rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ang = pos.float()[:, None] * self.inv_freq[None]  # (N, d/2)
        return ang.cos()[:, None], ang.sin()[:, None]  # (N, 1, d/2): broadcast over heads

    def block_mask(self, pos: torch.Tensor) -> BlockMask:
        """Row b reads key blocks 0..pos[b] // KV_BLOCK: those wholly at or before pos as full blocks, the
        one holding pos (unless it ends exactly there) as a partial block masked by `kv <= pos`. Built from
        tensor ops only (graph-capturable, no host sync); its shapes depend on the batch, never on lengths."""
        b, dev = pos.shape[0], pos.device
        n = self.cache_len // KV_BLOCK
        self._kv_limit[:b].copy_(pos)
        full = ((pos + 1) // KV_BLOCK).to(torch.int32)  # blocks wholly <= pos
        partial = ((pos + 1) % KV_BLOCK != 0).to(torch.int32)
        order = torch.arange(n, dtype=torch.int32, device=dev).expand(b, n)
        full_idx = order.reshape(b, 1, 1, n).contiguous()
        part_idx = (
            torch.where(order == 0, full[:, None].clamp(max=n - 1), order).reshape(b, 1, 1, n).contiguous()
        )
        return BlockMask.from_kv_blocks(
            partial.view(b, 1, 1),
            part_idx,
            full.view(b, 1, 1),
            full_idx,
            BLOCK_SIZE=KV_BLOCK,
            mask_mod=self._mask_mod,
            seq_lengths=(self.shape.heads // self.shape.kv_heads, self.cache_len),  # packed GQA rows
            compute_q_blocks=False,
        )

    def decode_mask(self, pos: torch.Tensor, kv_len: int = 0) -> torch.Tensor | BlockMask:
        """What each row 0..B-1 may read: flex's block mask, or the padded path's (B, 1, 1, kv_len) bool.
        Built outside any compiled region (Inductor's CPU flex lowering rejects a traced block mask)."""
        if self.attention == "flex":
            return self.block_mask(pos)
        if self.attention == "triton":
            return pos + 1  # each row's key count
        b, kv_len = pos.shape[0], kv_len or self.max_seq
        return (torch.arange(kv_len, device=pos.device)[None] <= pos[:, None]).view(b, 1, 1, kv_len)

    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, kv_len: int = 0) -> torch.Tensor:
        """One token for each of cache rows 0..B-1 at its own position → head logits (B, 28 673), float32.
        `kv_len` (a bucket ≥ every row's pos + 1) matters only to the padded SDPA path."""
        return self.decode_masked(tokens, pos, self.decode_mask(pos, kv_len))

    def decode_masked(
        self, tokens: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | BlockMask
    ) -> torch.Tensor:
        b = tokens.shape[0]
        rows = torch.arange(b, device=tokens.device)
        cos, sin = self._rope(pos)
        x = self.embed_tokens(tokens)
        for block, cache in zip(self.layers, self.caches, strict=True):
            assert isinstance(block, Block)
            h = block.self_attn.decode(
                block.input_layernorm(x), cache, rows, pos, cos, sin, mask, self._flex, self.attention
            )
            x = x + h
            x = x + block.mlp(block.post_attention_layernorm(x))
        return self.head(self.norm(x)).float()

    def prefill(self, tokens: torch.Tensor, rows: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """N prompts (N, T) right-padded, into cache `rows` at positions 0..T-1 → each prompt's last real
        token's head logits (N, 28 673), float32. One forward for a whole admission pass."""
        n, t = tokens.shape
        cos, sin = self._rope(torch.arange(t, device=tokens.device))
        x = self.embed_tokens(tokens)
        for block, (kc, vc) in zip(self.layers, self.caches, strict=True):
            x = self._prefill_layer(block, x, kc, vc, rows, cos, sin)
        last = x[torch.arange(n, device=x.device), lengths - 1]  # (N, hidden)
        return self.head(self.norm(last)).float()
