"""deploy/engine_prepare.py: weights fetched and the engine built once, safely shared between pods."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from deploy.engine_prepare import PrepareOptions, engine_dir, is_done, main, prepare, run_build


class Recorder:
    def __init__(self, fail_build: bool = False, build_s: float = 0.0) -> None:
        self.fetched: list[str] = []
        self.built: list[Path] = []
        self.fail_build = fail_build
        self.build_s = build_s

    def fetch(self, repo: str, dest: Path) -> None:
        self.fetched.append(repo)
        (dest / "config.json").write_text("{}")

    def build(self, command: str, checkpoint: Path, out: Path, max_batch: int) -> None:
        assert (checkpoint / "config.json").exists()
        time.sleep(self.build_s)
        if self.fail_build:
            (out / "half-written.engine").write_text("x")
            raise RuntimeError("build failed")
        (out / "rank0.engine").write_text(f"batch={max_batch}")
        self.built.append(out)


def test_first_run_fetches_and_builds_then_restarts_do_nothing(tmp_path: Path) -> None:
    opts = PrepareOptions(cache_dir=tmp_path, engine_key="h100-3g.40gb", max_batch=24)
    rec = Recorder()
    paths = prepare(opts, fetch=rec.fetch, build=rec.build)
    assert rec.fetched == [opts.checkpoint_repo, opts.snac_repo]
    assert paths.engine_dir == engine_dir(opts) and is_done(paths.engine_dir)
    assert (paths.engine_dir / "rank0.engine").read_text() == "batch=24"
    assert paths.engine_dir.name.startswith("h100-3g.40gb-")

    again = Recorder()
    assert prepare(opts, fetch=again.fetch, build=again.build) == paths
    assert again.fetched == [] and again.built == []


def test_a_failed_build_leaves_no_engine_and_is_retried(tmp_path: Path) -> None:
    opts = PrepareOptions(cache_dir=tmp_path)
    with pytest.raises(RuntimeError):
        prepare(opts, fetch=Recorder().fetch, build=Recorder(fail_build=True).build)
    assert not engine_dir(opts).exists()
    rec = Recorder()
    paths = prepare(opts, fetch=rec.fetch, build=rec.build)
    assert rec.fetched == []  # weights were complete
    assert len(rec.built) == 1 and is_done(paths.engine_dir or tmp_path / "missing")
    assert not (paths.engine_dir / "half-written.engine").exists()  # type: ignore[operator]


def test_new_build_inputs_get_their_own_engine(tmp_path: Path) -> None:
    a = PrepareOptions(cache_dir=tmp_path, max_batch=16)
    b = PrepareOptions(cache_dir=tmp_path, max_batch=32)
    assert engine_dir(a) != engine_dir(b)
    rec = Recorder()
    prepare(a, fetch=rec.fetch, build=rec.build)
    prepare(b, fetch=rec.fetch, build=rec.build)
    assert len(rec.built) == 2


def test_fetch_only_builds_nothing(tmp_path: Path) -> None:
    rec = Recorder()
    paths = prepare(PrepareOptions(cache_dir=tmp_path, fetch_only=True), fetch=rec.fetch, build=rec.build)
    assert paths.engine_dir is None and rec.built == [] and len(rec.fetched) == 2


def test_pods_sharing_the_cache_build_once(tmp_path: Path) -> None:
    opts = PrepareOptions(cache_dir=tmp_path, lock_poll_s=0.05)
    rec = Recorder(build_s=0.3)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(prepare(opts, fetch=rec.fetch, build=rec.build)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len(rec.built) == 1 and len(rec.fetched) == 2


def test_build_command_placeholders_reach_the_real_process(tmp_path: Path) -> None:
    out = tmp_path / "engine"
    out.mkdir()
    script = "import sys, pathlib; pathlib.Path(sys.argv[2], 'args').write_text(' '.join(sys.argv[1:]))"
    command = f"{sys.executable} -c {script!r} {{checkpoint}} {{engine_dir}} {{max_batch}}"
    run_build(command, tmp_path / "ckpt", out, 24)
    assert (out / "args").read_text() == f"{tmp_path / 'ckpt'} {out} 24"


def test_cli_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cache-dir", str(tmp_path), "--max-batch", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "engine_prepare: --max-batch must be >= 1"


def test_cli_reports_a_failing_build_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for repo in ("a/ckpt", "b/snac"):
        done = tmp_path / "hf" / repo.replace("/", "--")
        done.mkdir(parents=True)
        (done / ".parley-complete").write_text("x")
    argv = ["--cache-dir", str(tmp_path), "--checkpoint-repo", "a/ckpt", "--snac-repo", "b/snac"]
    assert main([*argv, "--build-command", f"{sys.executable} -c 'raise SystemExit(3)'"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("engine_prepare:") and "exit status 3" in err[0]


def test_image_entrypoint_prepare_runs_the_configured_build_once(tmp_path: Path) -> None:
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    cache = tmp_path / "models"
    for repo in ("canopylabs--orpheus-3b-0.1-ft", "hubertsiuzdak--snac_24khz"):  # weights already fetched
        (cache / "hf" / repo).mkdir(parents=True)
        (cache / "hf" / repo / ".parley-complete").write_text("x")
    script = "import sys, pathlib; pathlib.Path(sys.argv[1], 'built').write_text(sys.argv[2])"
    env = {
        **os.environ,
        "PARLEY_MODEL_CACHE_DIR": str(cache),
        "PARLEY_ENGINE_KEY": "test-slice",
        "PARLEY_ENGINE_MAX_STREAMS": "7",
        "PARLEY_ENGINE_BUILD_COMMAND": f"{sys.executable} -c {script!r} {{engine_dir}} {{max_batch}}",
    }
    entry = root / "deploy" / "engine-entrypoint.sh"
    for _ in range(2):
        res = subprocess.run(
            ["bash", str(entry), "prepare"], env=env, capture_output=True, text=True, timeout=60
        )
        assert res.returncode == 0, res.stderr
    (built,) = (cache / "engines").glob("test-slice-*/built")
    assert built.read_text() == "7"
    assert not list((cache / "engines").glob("*.partial"))


def _build_engine_module():  # type: ignore[no-untyped-def]
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "deploy" / "orpheus" / "build_engine.py"
    spec = importlib.util.spec_from_file_location("parley_build_engine", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("runtime", ["pytorch", "engine"])
def test_default_build_command_parses_with_the_real_build_script(tmp_path: Path, runtime: str) -> None:
    """The default prepare → build chain: the exact argv run_build makes is accepted by build_engine.py."""
    import shlex

    from deploy.engine_prepare import DEFAULT_BUILD_COMMAND, resolved_command

    opts = PrepareOptions(cache_dir=tmp_path, max_batch=24, runtime=runtime)
    command = resolved_command(opts)
    assert command.startswith("python deploy/orpheus/build_engine.py ")
    assert "{runtime}" in DEFAULT_BUILD_COMMAND and "{runtime}" not in command
    ckpt, out = tmp_path / "ckpt", tmp_path / "engine.partial"
    argv = [p.format(checkpoint=ckpt, engine_dir=out, max_batch=24) for p in shlex.split(command)]
    args = _build_engine_module().parse_args(argv[2:])  # after "python deploy/orpheus/build_engine.py"
    assert (args.model, args.out, args.max_batch, args.runtime) == (str(ckpt), str(out), 24, runtime)


def test_runtime_changes_the_engine_folder(tmp_path: Path) -> None:
    a = PrepareOptions(cache_dir=tmp_path, runtime="pytorch")
    b = PrepareOptions(cache_dir=tmp_path, runtime="engine")
    assert engine_dir(a) != engine_dir(b)
