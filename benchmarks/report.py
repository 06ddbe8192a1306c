"""Reports for calls: the per-turn latency table, percentiles, and the timeline PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .harness import CallResult


def pct(values: list[float], q: float) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return round(float(np.percentile(vals, q)), 1)


def p50_p95(values: list[Any]) -> dict[str, float | None]:
    return {"p50": pct(values, 50), "p95": pct(values, 95)}


def call_json(res: CallResult) -> dict[str, Any]:
    turns = [t.as_json() for t in res.turns]
    errors = list(res.errors) + [f"{t.file}: {t.error}" for t in res.turns if t.error]
    return {
        "pipeline": res.pipeline,
        "greeting_first_audio_ms": None
        if res.greeting_first_audio_ms is None
        else round(res.greeting_first_audio_ms, 1),
        "turns": turns,
        "v2v_ms": p50_p95([t.v2v_ms for t in res.turns]),
        "first_audible_ms": p50_p95([t.first_audible_ms for t in res.turns]),
        "stt_final_ms": p50_p95([t.stt_final_ms for t in res.turns]),
        "llm_ttft_ms": p50_p95([t.llm_ttft_ms for t in res.turns]),
        "llm_to_tts_request_ms": p50_p95([t.llm_to_tts_request_ms for t in res.turns]),
        "errors": errors,
    }


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.0f}"


def conversation_text(res: CallResult, show_text: bool = True) -> str:
    lines = [f"== {res.pipeline} pipeline =="]
    if res.greeting_first_audio_ms is not None:
        lines.append(f"greeting: first audio after {res.greeting_first_audio_ms:.0f} ms")
    for t in res.turns:
        if show_text:
            lines.append(f"caller ({t.file}): {t.user_text or '(no transcript)'}")
            lines.append(f"agent: {t.reply_text or '(no reply)'}")
        if t.error:
            lines.append(f"  ! {t.error}")
    return "\n".join(lines)


def latency_table(res: CallResult) -> str:
    head = ("turn", "v2v", "audible", "endpoint", "stt_final", "llm_ttft", "llm→tts", "tts_ttfb")
    rows = [head]
    for t in res.turns:
        rows.append(
            (
                t.file,
                _fmt(t.v2v_ms),
                _fmt(t.first_audible_ms),
                _fmt(t.endpoint_ms),
                _fmt(t.stt_final_ms),
                _fmt(t.llm_ttft_ms),
                _fmt(t.llm_to_tts_request_ms),
                _fmt(t.tts_ttfb_ms),
            )
        )
    j = call_json(res)
    rows.append(("p50", _fmt(j["v2v_ms"]["p50"]), _fmt(j["first_audible_ms"]["p50"]), "", "", "", "", ""))
    rows.append(("p95", _fmt(j["v2v_ms"]["p95"]), _fmt(j["first_audible_ms"]["p95"]), "", "", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = [f"latency (ms, caller's last voiced sample → event) — {res.pipeline}"]
    for i, r in enumerate(rows):
        out.append(
            "  ".join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


_COLORS = {
    "endpoint": "tab:orange",
    "stt_final": "tab:green",
    "llm_first_token": "tab:purple",
    "tts_piece": "tab:brown",
    "tts_first_frame": "tab:red",
}


def timeline_png(res: CallResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rate = 8000
    dur = res.end - res.t0 + 0.5
    caller = res.mic.track.render(res.t0, rate, dur)
    agent = res.speaker.track.render(res.t0, rate, dur)
    t = np.arange(len(caller)) / rate
    fig, ax = plt.subplots(figsize=(max(10, dur * 0.6), 4))
    ax.plot(t, np.abs(caller) + 1.1, lw=0.4, color="tab:blue", label="caller")
    ax.plot(t[: len(agent)], np.abs(agent[: len(t)]), lw=0.4, color="tab:gray", label="agent")
    seen = set()
    for m in res.marks:
        if m.kind in _COLORS:
            lbl = m.kind if m.kind not in seen else None
            seen.add(m.kind)
            ax.axvline(m.t - res.t0, color=_COLORS[m.kind], lw=0.8, ls="--", label=lbl)
    for tr in res.turns:
        ax.axvspan(
            tr.speech_start - res.t0, tr.speech_end - res.t0, ymin=0.5, ymax=1.0, color="tab:blue", alpha=0.08
        )
        if tr.v2v_ms is not None:
            x = tr.speech_end - res.t0
            ax.annotate(f"{tr.v2v_ms:.0f} ms", (x, 1.0), fontsize=7)
    for a, b in res.filler_windows:
        ax.axvspan(a - res.t0, b - res.t0, ymax=0.5, color="gold", alpha=0.3)
    ax.set_yticks([0.5, 1.6], ["agent", "caller"])
    ax.set_xlabel("seconds since the call started")
    ax.set_title(f"Parley call timeline — {res.pipeline}")
    ax.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
