"""Orpheus token ids (DESIGN §2): the one place these numbers live."""

from __future__ import annotations

BOS = 128000
EOT = 128009
CUSTOM_BASE = 128256  # <custom_token_N> = CUSTOM_BASE + N
START_OF_SPEECH = 128257
END_OF_SPEECH = 128258  # THE stop id
START_OF_HUMAN = 128259
END_OF_HUMAN = 128260
START_OF_AI = 128261
END_OF_AI = 128262
PAD = 128263
AUDIO_BASE = 128266  # audio id = AUDIO_BASE + CODEBOOK * position + code
CODEBOOK = 4096
FRAME_TOKENS = 7
VOCAB_SIZE = 156940
AUDIO_END = AUDIO_BASE + CODEBOOK * FRAME_TOKENS  # one past the last audio id

SAMPLE_RATE = 24000
FRAME_SAMPLES = 2048  # one 7-token frame decodes to 2048 samples (85.33 ms)
TOKENS_PER_SECOND = FRAME_TOKENS * SAMPLE_RATE / FRAME_SAMPLES  # 82.03: real time for one stream


def audio_id(position: int, code: int) -> int:
    """The token id for `code` at `position` (0..6) of a frame."""
    if not 0 <= position < FRAME_TOKENS or not 0 <= code < CODEBOOK:
        raise ValueError(f"position {position} / code {code} out of range")
    return AUDIO_BASE + CODEBOOK * position + code


def frames_to_codes(frames):  # type: ignore[no-untyped-def]
    """(n, 7) frame codes → SNAC's three code levels [(n,), (2n,), (4n,)] (numpy in, numpy out).

    Level 0 ← p0; level 1 ← p1, p4; level 2 ← p2, p3, p5, p6 (in time order).
    """
    import numpy as np

    f = np.asarray(frames)
    n = f.shape[-2]
    lead = f.shape[:-2]
    l0 = f[..., 0]
    l1 = f[..., [1, 4]].reshape(*lead, 2 * n)
    l2 = f[..., [2, 3, 5, 6]].reshape(*lead, 4 * n)
    return l0, l1, l2
