"""Sampling on the device, for a whole batch at once: frame-position restriction, repetition penalty over a
recent window, temperature, top-p. Tensor ops only (no host sync), so it can live inside a CUDA graph.

The head's logits are laid out as 7 × 4096 audio codes then the stop id (see model.HEAD_ROWS). Position p
samples only from its own 4096 codes; the stop id competes only at a frame boundary (p = 0). The window
`history` holds, per row, the last W sampled codes as head columns (p·4096 + c; −1 = empty); only those of
the current position can be penalised, since no other id can be sampled there.
"""

from __future__ import annotations

import torch

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.cuda.model import STOP_COLUMN

CHOICES = ids.CODEBOOK + 1  # 4096 codes + stop


def restrict(logits: torch.Tensor, framepos: torch.Tensor) -> torch.Tensor:
    """(B, 28 673) head logits → (B, 4097): the row's position's 4096 codes, then stop (−inf off p0)."""
    b = logits.shape[0]
    audio = logits[:, :STOP_COLUMN].view(b, ids.FRAME_TOKENS, ids.CODEBOOK)
    own = audio.gather(1, framepos.view(b, 1, 1).expand(b, 1, ids.CODEBOOK)).squeeze(1)
    stop = logits[:, STOP_COLUMN:].masked_fill(framepos.view(b, 1) != 0, float("-inf"))
    return torch.cat([own, stop], dim=1)


def penalise(
    z: torch.Tensor, framepos: torch.Tensor, history: torch.Tensor, penalty: torch.Tensor
) -> torch.Tensor:
    """HF-style repetition penalty on this position's codes seen in the window (divide > 0, multiply < 0)."""
    local = history - (framepos * ids.CODEBOOK)[:, None]
    valid = (history >= 0) & (local >= 0) & (local < ids.CODEBOOK)
    idx = torch.where(valid, local, torch.full_like(local, CHOICES))  # invalid → a spare column
    seen = torch.zeros(z.shape[0], CHOICES + 1, dtype=torch.bool, device=z.device)
    seen.scatter_(1, idx, True)
    r = penalty[:, None]
    return torch.where(seen[:, :CHOICES], torch.where(z > 0, z / r, z * r), z)


def sample(
    z: torch.Tensor,  # (B, 4097) restricted logits, float32
    temperature: torch.Tensor,
    top_p: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Index 0..4096 per row (4096 = stop). Temperature ≤ 0 → greedy. Nucleus by sorting the 4097 choices."""
    greedy = z.argmax(-1)
    probs = torch.softmax(z / temperature.clamp(min=1e-5)[:, None], dim=-1)
    sp, si = probs.sort(dim=-1, descending=True)
    cut = (sp.cumsum(-1) - sp) > top_p[:, None]  # keep the smallest prefix reaching top_p (≥ 1 choice)
    sp = sp.masked_fill(cut, 0.0)
    noise = torch.empty_like(sp).exponential_(generator=generator)
    pick = (sp / noise).argmax(-1)  # exponential race: draws index i with probability sp_i / Σ sp
    choice = si.gather(1, pick[:, None]).squeeze(1)
    return torch.where(temperature <= 0, greedy, choice)


def to_token_ids(choice: torch.Tensor, framepos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampled index → (Orpheus token id, head column for the history; −1 for stop)."""
    is_stop = choice == ids.CODEBOOK
    column = framepos * ids.CODEBOOK + choice
    token = torch.where(is_stop, torch.full_like(choice, ids.END_OF_SPEECH), column + ids.AUDIO_BASE)
    return token, torch.where(is_stop, torch.full_like(choice, -1), column)
