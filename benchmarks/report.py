"""Reports for calls: the per-turn latency table, percentiles, and the timeline PNG."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from simulator.offline import CallResult

from .cli import pct, percentiles
from .heard import replies_heard

EARLY_MS = 100.0
"""This much agent voice heard inside a caller's turn is the agent taking the turn before the caller
finished (a cut-off first word, "I'm", is 150-200 ms; a click or one Opus frame is shorter)."""
FRAGMENT_SHARE = 0.75
"""A reply whose LLM was sent fewer than this share of the words the caller said in the turn (all its
finals) answered a fragment of it: the agent cut in at a pause and the caller's rest came apart from it."""
HELD_MS = 1500.0
"""A finished turn whose end of turn came later than this was held: the caller waits in silence."""


def backchannels(turns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Backchannels the call plan marks ("mm-hmm" over the agent), as a caller counts them: the reply they
    were said over stopped (the worker's marks: no reply speech after the turn before played to its end),
    or the agent answered them. None when the calls have none."""
    said = stopped = answered = 0
    prev: dict[str, Any] | None = None
    for t in turns:
        same_call = prev is not None and (prev.get("call"), prev.get("run")) == (t.get("call"), t.get("run"))
        if t.get("backchannel"):
            said += 1
            stopped += same_call and prev is not None and prev.get("completed_reply") == ""
            answered += bool(t.get("reply_text", "").strip())
        prev = t
    return {"said": said, "stopped_the_agent": stopped, "answered": answered} if said else None


def turn_taking(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Turns the agent took before the caller finished, and finished turns it held, as a caller counts."""
    after = [t for t in turns if t.get("spoke_over_ms") is not None]
    endpoints = [
        t["endpoint_ms"]
        for t in turns
        if t.get("endpoint_ms") is not None and t.get("start", "after_reply") == "after_reply"
    ]
    early = [t for t in after if t["spoke_over_ms"] >= EARLY_MS]
    answered = [t for t in after if t.get("answered_words")]
    fragments = [
        t for t in answered if t["answered_words"] < FRAGMENT_SHARE * len(t.get("user_text", "").split())
    ]
    return {
        "taken_early": len(early),
        "turns_after_reply": len(after),
        "early_turns": [
            {k: t[k] for k in ("call", "run", "file", "spoke_over_ms", "user_text") if k in t} for t in early
        ],
        "endpoint_ms": {**percentiles(endpoints), "max": max(endpoints) if endpoints else None},
        "held_over_1500ms": sum(1 for v in endpoints if v > HELD_MS),
        "fragment_replies": len(fragments) if answered else None,
        "backchannels": backchannels(turns),
        "fragment_turns": [
            {k: t[k] for k in ("call", "run", "file", "answered_words", "user_text") if k in t}
            for t in fragments
        ],
    }


def call_json(res: CallResult) -> dict[str, Any]:
    turns = [t.as_json() for t in res.turns]
    errors = list(res.errors) + turn_errors(res)
    return {
        "pipeline": res.pipeline,
        "greeting_first_audio_ms": None
        if res.greeting_first_audio_ms is None
        else round(res.greeting_first_audio_ms, 1),
        "turns": turns,
        "v2v_ms": percentiles([t.v2v_ms for t in res.turns]),
        "first_audible_ms": percentiles([t.first_audible_ms for t in res.turns]),
        "agent_stop_ms": percentiles([t.agent_stop_ms for t in res.turns]),
        "stt_final_ms": percentiles([t.stt_final_ms for t in res.turns]),
        "llm_ttft_ms": percentiles([t.llm_ttft_ms for t in res.turns]),
        "llm_to_tts_request_ms": percentiles([t.llm_to_tts_request_ms for t in res.turns]),
        "reply_words": {"p50": pct([t.reply_words for t in res.turns if t.reply_words is not None], 50)},
        "apologies": sum(1 for t in res.turns if t.problem == "apology"),
        "repeat_requests": sum(1 for t in res.turns if t.problem == "repeat_request"),
        "turn_taking": turn_taking(turns),
        "replies_heard": replies_heard(turns),
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


_NO_PLOTS_SAID = False


def pyplot() -> Any | None:
    """matplotlib's pyplot on the Agg backend, or None after a one-line note: matplotlib is in the `bench`
    dependency group, which the demo's install (`make setup-demo`) leaves out."""
    global _NO_PLOTS_SAID
    try:
        import matplotlib
    except ImportError:
        if not _NO_PLOTS_SAID:
            print("PNGs skipped: matplotlib is not installed (uv sync --group bench)", file=sys.stderr)
            _NO_PLOTS_SAID = True
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def timeline_png(res: CallResult, path: Path) -> bool:
    """Writes the call's timeline; False when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
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
    return True


# --- several pipelines, several runs ---------------------------------------------------------------------

TURN_MARKS = (
    "vad_end",
    "end_of_turn",
    "stt_final",
    "llm_first_token",
    "tts_text",
    "tts_first_audio",
    "published_first_voiced",
    "answer_published",
    "caller_first_voiced",
)
"""The per-turn marks whose medians a report gives (`marks_ms`), in the order a turn passes them."""


def turn_errors(res: CallResult) -> list[str]:
    """A turn's error, and any apology or repeat-request (both count as errors)."""
    out = [f"{t.file}: {t.error}" for t in res.turns if t.error]
    out += [f"{t.file}: {t.problem}: {t.reply_text[:80]!r}" for t in res.turns if t.problem]
    return out


def pipelines_json(
    runs: list[tuple[str, str, int, CallResult]], pipelines: list[str], n_runs: int, livekit: bool
) -> dict[str, Any]:
    """The multi-pipeline contract: per pipeline the pooled turns of every run and call, medians with a
    bootstrap 95 % interval, and the ratios of Parley's median to each baseline's (issue 15)."""
    raw: dict[str, dict[str, list[Any]]] = {}
    for name in pipelines:
        mine = [(call, r, res) for p, call, r, res in runs if p == name]
        raw[name] = {
            "turns": [
                {**t.as_json(), "call": call, "run": r, "pipeline": name}
                for call, r, res in mine
                for t in res.turns
            ],
            "greetings_ms": [
                round(res.greeting_first_audio_ms, 1)
                for _, _, res in mine
                if res.greeting_first_audio_ms is not None
            ],
            "errors": [
                f"run {r} {call}: {e}" for call, r, res in mine for e in [*res.errors, *turn_errors(res)]
            ],
        }
    return summarise(raw, pipelines, n_runs, livekit)


def summarise(
    raw: dict[str, dict[str, list[Any]]], pipelines: list[str], n_runs: int, livekit: bool
) -> dict[str, Any]:
    from simulator.call_plan import median_ci, ratio_ci

    out: dict[str, Any] = {"pipelines": {}, "runs": n_runs, "livekit": livekit}
    v2v_by: dict[str, list[float]] = {}
    for name in pipelines:
        turns, greetings, errors = raw[name]["turns"], raw[name]["greetings_ms"], raw[name]["errors"]
        v2v = [t["v2v_ms"] for t in turns if t["v2v_ms"] is not None]
        v2v_by[name] = v2v
        ci = median_ci(v2v)
        by_call: dict[str, Any] = {}
        for call in sorted({t["call"] for t in turns}):
            vals = [t["v2v_ms"] for t in turns if t["call"] == call and t["v2v_ms"] is not None]
            cci = median_ci(vals)
            by_call[call] = {
                "v2v_ms": percentiles(vals),
                "v2v_ci95_ms": [round(cci[0], 1), round(cci[1], 1)] if cci else None,
                "turns": sum(1 for t in turns if t["call"] == call),
            }
        out["pipelines"][name] = {
            "v2v_ms": percentiles(v2v),
            "v2v_ci95_ms": [round(ci[0], 1), round(ci[1], 1)] if ci else None,
            "first_audible_ms": percentiles([t["first_audible_ms"] for t in turns]),
            # turns said over the agent: their first voiced sample -> the agent's last one at the caller
            "agent_stop_ms": percentiles([t.get("agent_stop_ms") for t in turns]),
            "greeting_first_audio_ms": pct(greetings, 50),
            "greetings_ms": greetings,
            "errors": errors,
            "apologies": sum(1 for t in turns if t["problem"] == "apology"),
            "repeat_requests": sum(1 for t in turns if t["problem"] == "repeat_request"),
            "reply_words": {
                "p50": pct([t["reply_words"] for t in turns if t["reply_words"] is not None], 50)
            },
            "spoken_s": {"p50": pct([t["spoken_s"] for t in turns if t["spoken_s"] is not None], 50)},
            "marks_ms": {
                k: pct([t["marks"].get(k) for t in turns if t["marks"].get(k) is not None], 50)
                for k in TURN_MARKS
            },
            "turn_taking": turn_taking(turns),
            "replies_heard": replies_heard(turns),
            "by_call": by_call,
            "turns": turns,
        }
    ratios: dict[str, float | None] = {}
    ratio_cis: dict[str, list[float] | None] = {}
    p = out["pipelines"].get("parley", {}).get("v2v_ms", {}).get("p50")
    for name in pipelines:
        if name == "parley":
            continue
        s = out["pipelines"][name]["v2v_ms"]["p50"]
        ratios[name] = round(p / s, 3) if p and s else None
        rci = ratio_ci(v2v_by.get("parley", []), v2v_by[name])
        ratio_cis[name] = [round(rci[0], 3), round(rci[1], 3)] if rci else None
    out["ratio_v2v_p50"] = ratios
    out["ratio_v2v_p50_ci95"] = ratio_cis
    return out


def pipelines_table(report: dict[str, Any]) -> str:
    head = (
        "pipeline",
        "v2v p50",
        "95% CI",
        "v2v p95",
        "audible p50",
        "greeting",
        "words",
        "early",
        "fragments",
        "errors",
    )
    rows = [head]
    for name, r in report["pipelines"].items():
        ci = r["v2v_ci95_ms"]
        rows.append(
            (
                name,
                _fmt(r["v2v_ms"]["p50"]),
                f"{ci[0]:.0f}–{ci[1]:.0f}" if ci else "—",
                _fmt(r["v2v_ms"]["p95"]),
                _fmt(r["first_audible_ms"]["p50"]),
                _fmt(r["greeting_first_audio_ms"]),
                _fmt(r["reply_words"]["p50"]),
                _early(r.get("turn_taking")),
                _fragments(r.get("turn_taking")),
                str(len(r["errors"])),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    where = "through a real local LiveKit room" if report["livekit"] else "offline (no room)"
    lines = [f"v2v (ms, caller's last voiced sample → the answer heard), {report['runs']} rounds, {where}"]
    for i, row in enumerate(rows):
        lines.append(
            "  ".join(
                c.rjust(w) if k else c.ljust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name, ratio in report["ratio_v2v_p50"].items():
        ci = report["ratio_v2v_p50_ci95"].get(name)
        lines.append(
            f"parley / {name}: {ratio} (95% CI {ci[0]}–{ci[1]})" if ci else f"parley / {name}: {ratio}"
        )
    return "\n".join(lines)


def _early(tt: dict[str, Any] | None) -> str:
    """Turns taken before the caller finished, of the turns said after a reply ("—" offline)."""
    return f"{tt['taken_early']}/{tt['turns_after_reply']}" if tt and tt["turns_after_reply"] else "—"


def _fragments(tt: dict[str, Any] | None) -> str:
    """Replies whose LLM was sent only part of the caller's turn ("—" without the worker's marks)."""
    return "—" if not tt or tt.get("fragment_replies") is None else str(tt["fragment_replies"])
