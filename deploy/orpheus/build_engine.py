"""Quantize Orpheus 3B to FP8 (weights + KV cache) and build what TensorRT-LLM serves. GPU host only.

    python deploy/orpheus/build_engine.py --model /models/orpheus-3b-0.1-ft --out /models/orpheus-fp8 \
        [--runtime pytorch|engine] [--samples 512] [--max-batch 128]

Calibration matters: FP8 scales come from the activations seen during calibration, and Orpheus spends almost
all its tokens on audio codes (ids 128 266 + 4096·p + c), not text. Plain-text calibration sets
(cnn_dailymail, pile) leave the audio-token activations out of range. So the calibration set is Orpheus-
shaped: real prompts built exactly as the engine builds them (`[start_of_human] + "voice: text" + [eot,
end_of_human, start_of_ai, start_of_speech]`, all 8 voices, emotive tags, normalised numbers), each followed
by the audio tokens the BF16 model itself generates for it with the engine's sampling settings and per-
position id mask.

Outputs, by `--runtime`:
  pytorch  OUT/ is a pre-quantized FP8 HF checkpoint (ModelOpt `export_hf_checkpoint`) for `tensorrt_llm.LLM`
           (the PyTorch backend, TensorRT-LLM ≥ 1.0); serve with `--backend trtllm --trtllm-runtime pytorch`.
  engine   OUT/ holds the TensorRT engine built by `trtllm-build` (FP8 GEMMs, FP8 KV cache, paged + FP8
           context FMHA) and OUT/ckpt the TensorRT-LLM checkpoint it came from; serve with
           `--trtllm-runtime engine`.
Either way OUT itself is what the engine loads (deploy/engine-entrypoint.sh serves the prepared OUT), and the
tokenizer files are copied into it so the engine needs nothing else.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from plugins.orpheus.engine import ids  # noqa: E402
from plugins.orpheus.engine.text import EMOTIVE_TAGS, VOICES, prompt_ids, speakable_pieces  # noqa: E402

CALIBRATION_SENTENCES = [
    "Sure, I can help with that. Your table for two is booked at 7:30 pm.",
    "Let me check. The store opens at 9 tomorrow and closes at 6 in the evening.",
    "Thanks for waiting! Your order shipped this morning, so it should arrive on Friday.",
    "Of course. I've moved your appointment to Tuesday, March 3rd, at 2:15.",
    "Hmm, <sigh> that flight is full, but there's one at 10:40 that still has seats.",
    "Oh wow, <laugh> that's a great question. Honestly, I'm not sure anyone knows.",
    "Your balance is $1,284.50, and the next payment of $120 is due on the 15th.",
    "It's 18 degrees and cloudy right now, with a 40% chance of rain after lunch.",
    "Okay. So, first, unplug the router, wait thirty seconds, and then plug it back in.",
    "I'm sorry, <groan> I didn't catch that. Could you say the account number again?",
    "Great, you're all set. Is there anything else I can do for you today?",
    "The package weighs 2.5 kg and measures 40 cm on its longest side.",
    "Well, <chuckle> I'd say that went better than expected, wouldn't you?",
    "Please hold on for just a moment while I pull up your details.",
    "Good morning! This is a reminder about your dentist appointment tomorrow at 8 am.",
    "No problem at all. I'll send the confirmation to your email right away.",
]


def calibration_prompts(encode, samples: int, seed: int) -> list[list[int]]:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    voices = list(VOICES["en"])
    out = []
    for i in range(samples):
        text = rng.choice(CALIBRATION_SENTENCES)
        if rng.random() < 0.25:
            text = f"{text} <{rng.choice(EMOTIVE_TAGS)}> {rng.choice(CALIBRATION_SENTENCES)}"
        piece = " ".join(speakable_pieces(text))
        out.append(prompt_ids(voices[i % len(voices)], piece, encode))
    return out


def generate_audio_tokens(model, prompts: list[list[int]], max_new: int, batch: int) -> list[list[int]]:  # type: ignore[no-untyped-def]
    """Prompt + the model's own audio tokens (temperature 0.5, top-p 0.9, repetition penalty 1.1, id mask)."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    class PositionMask(LogitsProcessor):
        def __init__(self, prompt_len: int) -> None:
            self.prompt_len = prompt_len
            mask = torch.full((7, model.config.vocab_size), float("-inf"), device=model.device)
            for p in range(7):
                lo = ids.AUDIO_BASE + ids.CODEBOOK * p
                mask[p, lo : lo + ids.CODEBOOK] = 0
            mask[0, ids.END_OF_SPEECH] = 0
            self.mask = mask

        def __call__(self, input_ids, scores):  # type: ignore[no-untyped-def]
            return scores + self.mask[(input_ids.shape[1] - self.prompt_len) % 7]

    sequences: list[list[int]] = []
    for i in range(0, len(prompts), batch):
        group = prompts[i : i + batch]
        width = max(len(p) for p in group)
        padded = [[ids.PAD] * (width - len(p)) + p for p in group]  # left padding
        attn = [[0] * (width - len(p)) + [1] * len(p) for p in group]
        inp = torch.tensor(padded, device=model.device)
        with torch.inference_mode():
            out = model.generate(
                input_ids=inp,
                attention_mask=torch.tensor(attn, device=model.device),
                max_new_tokens=max_new,
                do_sample=True,
                temperature=0.5,
                top_p=0.9,
                repetition_penalty=1.1,
                eos_token_id=ids.END_OF_SPEECH,
                pad_token_id=ids.PAD,
                logits_processor=LogitsProcessorList([PositionMask(width)]),
            )
        for p, row in zip(group, out.tolist(), strict=True):
            gen = row[width:]
            if ids.END_OF_SPEECH in gen:
                gen = gen[: gen.index(ids.END_OF_SPEECH) + 1]
            sequences.append(p + gen)
        print(f"calibration: generated {len(sequences)}/{len(prompts)}", file=sys.stderr)
    return sequences


def quantize(args: argparse.Namespace) -> None:
    import modelopt.torch.quantization as mtq
    import torch
    from transformers import AutoModelForCausalLM

    from plugins.orpheus.engine.hf_compat import dtype_kwarg
    from plugins.orpheus.engine.tokenizer import load_encoder

    model = AutoModelForCausalLM.from_pretrained(
        args.model, device_map="cuda", **dtype_kwarg(torch.bfloat16)
    ).eval()
    encode = load_encoder(args.model)
    prompts = calibration_prompts(encode, args.samples, args.seed)
    sequences = generate_audio_tokens(model, prompts, args.max_new_tokens, args.gen_batch)
    stats = [len(s) for s in sequences]
    print(f"calibration set: {len(sequences)} sequences, {sum(stats)} tokens", file=sys.stderr)

    def forward_loop(m) -> None:  # type: ignore[no-untyped-def]
        with torch.inference_mode():
            for seq in sequences:
                m(torch.tensor([seq], device="cuda"))

    cfg = dict(mtq.FP8_DEFAULT_CFG)
    cfg["quant_cfg"] = {**mtq.FP8_DEFAULT_CFG["quant_cfg"], **mtq.FP8_KV_CFG["quant_cfg"]}  # FP8 KV cache too
    model = mtq.quantize(model, cfg, forward_loop)
    mtq.print_quant_summary(model)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.runtime == "pytorch":
        from modelopt.torch.export import export_hf_checkpoint

        export_hf_checkpoint(model, export_dir=str(out))
        target = out
    else:
        from modelopt.torch.export import export_tensorrt_llm_checkpoint

        ckpt = out / "ckpt"
        export_tensorrt_llm_checkpoint(
            model, "llama", torch.bfloat16, export_dir=str(ckpt), inference_tensor_parallel=1
        )
        build_trt_engine(ckpt, out, args)  # engine files in OUT itself: the directory the engine serves
        target = out
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        src = Path(args.model) / name
        if src.is_file():
            shutil.copy(src, target / name)
    (out / "parley-build.json").write_text(
        json.dumps(
            {
                "source": str(args.model),
                "runtime": args.runtime,
                "quant": "FP8 weights + FP8 KV cache (ModelOpt), Orpheus prompt+audio calibration",
                "calibration_sequences": len(sequences),
                "calibration_tokens": sum(stats),
                "max_batch": args.max_batch,
            },
            indent=2,
        )
    )
    print(f"done: {target}")


def build_trt_engine(ckpt: Path, engine_dir: Path, args: argparse.Namespace) -> None:
    """trtllm-build with FP8 GEMMs (from the checkpoint), paged KV, FP8 context FMHA, in-flight batching."""
    cmd = [
        "trtllm-build",
        "--checkpoint_dir",
        str(ckpt),
        "--output_dir",
        str(engine_dir),
        "--gemm_plugin",
        "auto",
        "--gpt_attention_plugin",
        "auto",
        "--use_paged_context_fmha",
        "enable",
        "--use_fp8_context_fmha",
        "enable",
        "--remove_input_padding",
        "enable",
        "--kv_cache_type",
        "paged",
        "--max_batch_size",
        str(args.max_batch),
        "--max_input_len",
        str(args.max_input_len),
        "--max_seq_len",
        str(args.max_seq_len),
        "--max_num_tokens",
        str(args.max_num_tokens),
        "--multiple_profiles",
        "enable",
    ]
    print(" ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The build's command line (deploy/engine_prepare.py's default build command must parse here)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--model", required=True, help="Orpheus HF checkpoint dir (BF16)")
    p.add_argument("--out", required=True)
    p.add_argument("--runtime", default="pytorch", choices=["pytorch", "engine"])
    p.add_argument("--samples", type=int, default=512, help="calibration prompts")
    p.add_argument(
        "--max-new-tokens", type=int, default=700, help="audio tokens generated per prompt (~8.5 s)"
    )
    p.add_argument("--gen-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-batch", type=int, default=128)
    p.add_argument("--max-input-len", type=int, default=512)
    p.add_argument("--max-seq-len", type=int, default=4096)
    p.add_argument("--max-num-tokens", type=int, default=8192)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    quantize(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
