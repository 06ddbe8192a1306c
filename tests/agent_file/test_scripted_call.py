"""Call scripts: rendered to caller audio (the real CPU voice), bad scripts give one line, expectations are
checked per turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

from simulator.call_plan import load_plan, plan_from_json, plan_to_json
from simulator.call_script import check_expectations, parse_script, render_script

ROOT = Path(__file__).resolve().parents[2]


def test_render_script_writes_turns_in_order(tmp_path: Path) -> None:
    script = tmp_path / "call.yaml"
    script.write_text(
        "turns:\n"
        "  - say: 'Hello {{clinic}}. [pause 1.0] Is it open?'\n    expect: [open]\n"
        "  - say: Stop please.\n    barge_in: true\n    delay_ms: 500\n"
        "  - say: Mm-hmm.\n    backchannel: true\n"
    )
    out = render_script(script, tmp_path / "out", ROOT / "examples/dental_clinic.yaml")
    turns = json.loads((out / "turns.json").read_text())
    assert [t["file"] for t in turns] == sorted(p.name for p in out.glob("*.wav"))
    assert turns[0]["text"] == "Hello Bright Smile Dental. Is it open?" and turns[0]["start"] == "after_reply"
    assert turns[1] == {
        "file": turns[1]["file"],
        "text": "Stop please.",
        "start": "during_reply",
        "delay_ms": 500,
        "expect": [],
        "backchannel": False,
    }
    assert turns[2]["start"] == "during_reply" and turns[2]["backchannel"]  # said over the reply
    plan = load_plan(out)
    assert [t.backchannel for t in plan] == [False, False, True]
    assert [t.backchannel for t in plan_from_json(plan_to_json(plan))] == [False, False, True]
    pcm, rate = sf.read(out / turns[0]["file"], dtype="int16")
    assert rate == 16_000 and pcm.ndim == 1
    # the [pause 1.0] is a stretch of exact silence of about a second inside the line
    zero = (pcm == 0).astype(int)
    runs, run = [], 0
    for z in zero:
        run = run + 1 if z else 0
        runs.append(run)
    inner = max(runs[int(0.5 * rate) : len(pcm) - int(1.1 * rate)])
    assert 0.95 * rate <= inner <= 1.05 * rate


@pytest.mark.slow
def test_a_held_out_caller_voice_overrides_the_script(tmp_path: Path) -> None:
    script = tmp_path / "call.yaml"
    script.write_text("voice: heart\nturns:\n  - say: My extension is seven three.\n")
    out = render_script(script, tmp_path / "out", voice="piper-joe")
    pcm, rate = sf.read(next(out.glob("*.wav")), dtype="int16")
    assert rate == 16_000 and len(pcm) > 2.0 * rate  # 1.3 s of lead and tail silence, then the speech
    assert int(abs(pcm.astype(int)).max()) > 10_000  # normalised to -3 dBFS: the voice spoke
    with pytest.raises(ValueError, match="or piper-joe"):
        render_script(script, tmp_path / "out2", voice="nobody")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("turns: []", "turns: must be a non-empty list"),
        ("turns:\n  - say: ''", "turns[0].say: must be non-empty text"),
        ("turns:\n  - say: hi\n    expect: 3", "turns[0].expect: must be a list of words"),
        ("turns:\n  - say: hi\n    delay_ms: -1", "turns[0].delay_ms: must be a whole number"),
        ("turns:\n  - say: hi\n    barge_in: maybe", "turns[0].barge_in: must be true or false"),
        ("turns:\n  - say: hi\n    wait: 1", "turns[0].wait: unknown field"),
        ("turns:\n  - say: hm\n    backchannel: 1", "turns[0].backchannel: must be true or false"),
        (
            "turns:\n  - say: hm\n    backchannel: true\n    barge_in: false",
            "turns[0].backchannel: is said over",
        ),
        ("voice: nobody\nturns: [hi]", "voice: unknown CPU voice"),
        ("voice: espeak-zz\nturns: [hi]", "voice: unknown espeak voice"),
        ("turns: ['Hi {{who}}']", "turns[0].say: unknown variable {{who}}"),
    ],
)
def test_bad_script_is_one_line_naming_the_field(tmp_path: Path, text: str, field: str) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text(text)
    with pytest.raises(ValueError) as err:
        parse_script(script)
    assert str(err.value) == f"script {script}: {field}" or str(err.value).startswith(
        f"script {script}: {field}"
    )
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["book_cleaning.yaml", "barge_in.yaml"])
def test_example_scripts_parse(name: str) -> None:
    _, turns = parse_script(ROOT / "examples/calls" / name, ROOT / "examples/dental_clinic.yaml")
    assert turns


def test_expectations_per_turn(tmp_path: Path) -> None:
    listing = [
        {"file": "01-a.wav", "expect": ["Dr. Morgan", "Tuesday"]},
        {"file": "02-b.wav", "expect": ["booked"]},
        {"file": "03-c.wav", "expect": []},
    ]
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(listing))
    got = check_expectations(path, ["Dr Morgan has a slot on tuesday.", "I have not booked-in yet"])
    assert got[0] == {"file": "01-a.wav", "expect": ["Dr. Morgan", "Tuesday"], "missing": [], "held": True}
    assert got[1]["held"] is True  # whole words: "booked-in" contains the word "booked"
    assert got[2]["held"] is True  # nothing expected
    missed = check_expectations(path, ["Dr. Morganson can see you."])
    assert missed[0]["missing"] == ["Dr. Morgan", "Tuesday"] and missed[1]["missing"] == ["booked"]
