"""A Llama decoder for batched Orpheus decode: static slotted KV cache, RoPE with Llama-3 scaling, GQA.

gpt-fast-shaped: plain modules, no framework. The KV cache holds one row per concurrent request
(`rows × max_seq × kv_heads × head_dim` per layer); a decode step runs rows 0..B-1 at once, each at its own
position, so a batch is a prefix view of the cache and needs no gather. The LM head keeps only the rows the
engine can ever sample (7 × 4096 audio codes + the stop id: 28 673 of 156 940). Same code on CPU (eager,
tests) and CUDA (the generator captures it in graphs). Weights load from a Hugging Face Llama checkpoint
(safetensors) or start random at any shape (benchmarks).
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

from plugins.orpheus.engine import ids

HEAD_ROWS = ids.AUDIO_END - ids.AUDIO_BASE + 1  # 28 673: audio codes, then the stop id last
STOP_COLUMN = HEAD_ROWS - 1


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
        self.q_proj = nn.Linear(h, shape.heads * d, bias=False)
        self.k_proj = nn.Linear(h, shape.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, shape.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(shape.heads * d, h, bias=False)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lead = x.shape[:-1]
        q = self.q_proj(x).view(*lead, self.heads, self.head_dim)
        k = self.k_proj(x).view(*lead, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(*lead, self.kv_heads, self.head_dim)
        return q, k, v

    def decode(
        self,
        x: torch.Tensor,  # (B, hidden): one token per cache row 0..B-1
        cache: tuple[torch.Tensor, torch.Tensor],
        rows: torch.Tensor,
        pos: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor,  # (B, 1, 1, L) bool: key position <= the row's position
    ) -> torch.Tensor:
        q, k, v = self._qkv(x)  # (B, heads, d)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        kc, vc = cache
        kc.index_put_((rows, pos), k)
        vc.index_put_((rows, pos), v)
        b, kv_len = x.shape[0], mask.shape[-1]
        keys = kc[:b, :kv_len].transpose(1, 2)  # (B, kv_heads, L, d): a view, no gather
        vals = vc[:b, :kv_len].transpose(1, 2)
        out = F.scaled_dot_product_attention(q.unsqueeze(2), keys, vals, attn_mask=mask, enable_gqa=True)
        return self.o_proj(out.reshape(b, self.heads * self.head_dim))

    def prefill(
        self,
        x: torch.Tensor,  # (T, hidden): one prompt, positions 0..T-1
        cache: tuple[torch.Tensor, torch.Tensor],
        row: int,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> torch.Tensor:
        t = x.shape[0]
        q, k, v = self._qkv(x)  # (T, heads, d)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        kc, vc = cache
        kc[row, :t] = k
        vc[row, :t] = v
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1).unsqueeze(0),
            k.transpose(0, 1).unsqueeze(0),
            v.transpose(0, 1).unsqueeze(0),
            is_causal=True,
            enable_gqa=True,
        )  # (1, heads, T, d)
        return self.o_proj(out[0].transpose(0, 1).reshape(t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        h, i = shape.hidden_size, shape.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_eps)
        self.mlp = MLP(shape)


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
        self.max_seq = 0

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
        lm = state.get("lm_head.weight", state["model.embed_tokens.weight"])  # tied in the tiny test model
        ours["head.weight"] = torch.cat(
            [lm[ids.AUDIO_BASE : ids.AUDIO_END], lm[ids.END_OF_SPEECH : ids.END_OF_SPEECH + 1]]
        )
        ours = {k: v for k, v in ours.items() if not k.endswith("rotary_emb.inv_freq")}
        model.load_state_dict(ours, strict=True, assign=True)
        model.inv_freq = rope_inv_freq(shape)
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
        self.inv_freq = self.inv_freq.float()
        return self.eval().requires_grad_(False)

    def use_fp8(self) -> None:
        """Swap every projection for an FP8 one (weights quantized per tensor). Needs a GPU with FP8 GEMMs."""
        for block in self.layers:
            assert isinstance(block, Block)
            for mod, names in (
                (block.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                (block.mlp, ("gate_proj", "up_proj", "down_proj")),
            ):
                for n in names:
                    setattr(mod, n, Fp8Linear(getattr(mod, n).weight.data))

    def allocate(self, rows: int, max_seq: int) -> None:
        """The static KV cache: `rows` concurrent sequences of up to `max_seq` tokens."""
        s, p = self.shape, self.head.weight
        self.max_seq = max_seq
        self.caches = [
            tuple(  # type: ignore[misc]
                torch.zeros(rows, max_seq, s.kv_heads, s.head_dim, dtype=p.dtype, device=p.device)
                for _ in range(2)
            )
            for _ in range(s.layers)
        ]

    def kv_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for pair in self.caches for t in pair)

    # -- forward --------------------------------------------------------------------------------------
    def _rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ang = pos.float()[:, None] * self.inv_freq[None]  # (N, d/2)
        return ang.cos()[:, None], ang.sin()[:, None]  # (N, 1, d/2): broadcast over heads

    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, kv_len: int) -> torch.Tensor:
        """One token for each of cache rows 0..B-1 at its own position → head logits (B, 28 673), float32."""
        b = tokens.shape[0]
        rows = torch.arange(b, device=tokens.device)
        cos, sin = self._rope(pos)
        mask = (torch.arange(kv_len, device=tokens.device)[None] <= pos[:, None]).view(b, 1, 1, kv_len)
        x = self.embed_tokens(tokens)
        for block, cache in zip(self.layers, self.caches, strict=True):
            assert isinstance(block, Block)
            x = x + block.self_attn.decode(block.input_layernorm(x), cache, rows, pos, cos, sin, mask)
            x = x + block.mlp(block.post_attention_layernorm(x))
        return self.head(self.norm(x)).float()

    def prefill(self, tokens: torch.Tensor, row: int) -> torch.Tensor:
        """A whole prompt into cache row `row` (positions 0..T-1) → its last token's head logits (28 673,)."""
        t = tokens.shape[0]
        cos, sin = self._rope(torch.arange(t, device=tokens.device))
        x = self.embed_tokens(tokens)
        for block, cache in zip(self.layers, self.caches, strict=True):
            assert isinstance(block, Block)
            x = x + block.self_attn.prefill(block.input_layernorm(x), cache, row, cos, sin)
            x = x + block.mlp(block.post_attention_layernorm(x))
        return self.head(self.norm(x[-1:]))[0].float()
