"""benchmarks.llm_log reads llama.cpp's server log into scorer reads, replies and cancelled requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.llm_log import main, parse, summarise

# the line shapes llama.cpp's server writes (timestamps M.SS.mmm.uuu), for a scorer read, a reply and a
# request the client stopped reading; the warm-up request (task 0) starts before --skip-s
LOG = """\
0.00.706.690 I slot launch_slot_: id  0 | task 0 | processing task, is_child = 0
0.01.357.673 I slot print_timing: id  0 | task 0 | prompt eval time =     650.93 ms /   114 tokens (x)
0.01.357.688 I slot print_timing: id  0 | task 0 |        eval time =       0.00 ms /     1 tokens (x)
0.01.357.762 I slot      release: id  0 | task 0 | stop processing: n_tokens = 114, truncated = 0
0.20.000.000 I slot launch_slot_: id  1 | task 7 | processing task, is_child = 0
0.20.100.000 I slot print_timing: id  1 | task 7 | prompt eval time =      98.00 ms /     6 tokens (x)
0.20.100.100 I slot print_timing: id  1 | task 7 |        eval time =       0.00 ms /     1 tokens (x)
0.20.100.200 I slot      release: id  1 | task 7 | stop processing: n_tokens = 40, truncated = 0
0.21.000.000 I slot launch_slot_: id  2 | task 8 | processing task, is_child = 0
0.22.000.000 I slot print_timing: id  2 | task 8 | prompt eval time =     200.00 ms /    10 tokens (x)
0.22.000.100 I slot print_timing: id  2 | task 8 |        eval time =     800.00 ms /    20 tokens (x)
0.22.000.200 I slot      release: id  2 | task 8 | stop processing: n_tokens = 300, truncated = 0
0.22.500.000 I slot launch_slot_: id  3 | task 9 | processing task, is_child = 0
0.23.000.000 W srv          stop: cancel task, id_task = 9
0.23.000.100 I slot      release: id  3 | task 9 | stop processing: n_tokens = 250, truncated = 0
"""


def test_requests_are_split_by_kind_with_their_timings() -> None:
    report = summarise(parse(LOG.splitlines()), skip_s=10.0)
    assert (report["scorer"]["requests"], report["reply"]["requests"], report["cancelled"]["requests"]) == (
        1,
        1,
        1,
    )
    assert report["scorer"]["prompt_ms"]["p50"] == 98.0
    assert report["reply"]["ms_per_token"]["p50"] == 40.0
    assert report["reply"]["generated_tokens_p50"] == 20.0
    assert report["cancelled"]["wall_ms"]["p50"] == pytest.approx(500.1)
    assert report["span_s"] == pytest.approx(3.0, abs=0.01)
    assert report["in_flight_share"] == pytest.approx((0.1002 + 1.0002 + 0.5001) / 3.0001, abs=1e-3)


def test_a_log_with_no_requests_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "llm.log"
    log.write_text("not a llama.cpp log\n")
    assert main([str(log)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no finished request") and "\n" not in err
