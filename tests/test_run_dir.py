"""The run folder: its paths, new and existing runs, the newest run, runs/latest and the
checkpoints in it."""

import os
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import translator.run_dir as run_dir_module
from translator.checkpoint import CheckpointError
from translator.config import Config
from translator.run_dir import RunDir, RunDirError


def make_run(path, checkpoints=("best",)) -> RunDir:
    run = RunDir(path)
    run.path.mkdir(parents=True)
    run.write_config(Config())
    for name in checkpoints:
        run.save_checkpoint(name, {"model": {}, "config": {}, "step": 1})
    return run


def test_the_paths_of_a_run_folder(tmp_path):
    run = RunDir(tmp_path / "r")
    assert os.fspath(run) == str(tmp_path / "r") == str(run)
    names = {"config_file": "config.yaml", "tokenizer_dir": "tokenizer",
             "checkpoints_dir": "checkpoints", "metrics_file": "metrics.jsonl",
             "log_file": "train.log", "heatmaps_dir": "heatmaps",
             "test_scores_file": "test_scores.json",
             "test_hypotheses_file": "test_hypotheses.txt"}
    for attribute, name in names.items():
        assert getattr(run, attribute) == tmp_path / "r" / name
    assert run.checkpoint("last") == run.checkpoint("last.pt") == tmp_path / "r" / "checkpoints" \
        / "last.pt"
    assert run.hypotheses_file("test", 5).name == "hypotheses-test-beam5.txt"


def test_a_new_run_is_named_by_the_clock_and_never_overwrites(tmp_path):
    run = RunDir.new(tmp_path)
    assert run.path.parent == tmp_path and len(run.path.name) == len("20261130-061500")
    make_run(tmp_path / "taken")
    with pytest.raises(RunDirError, match="already exists"):
        RunDir.new(tmp_path, "taken")
    assert RunDir.new(tmp_path, "taken", overwrite=True).path == tmp_path / "taken"
    (tmp_path / "empty").mkdir()
    assert RunDir.new(tmp_path, "empty").path == tmp_path / "empty"


def test_run_folders_are_created_atomically_with_a_suffix_when_taken(tmp_path, monkeypatch):
    """Runs started in the same second (eight threads at once here) each get a folder of
    their own: an exclusive mkdir claims a name, the others take the next suffix."""
    monkeypatch.setattr(run_dir_module, "time",
                        types.SimpleNamespace(strftime=lambda _: "20261130-061500"))
    start = threading.Barrier(8)

    def new_run(_) -> RunDir:
        start.wait()
        return RunDir.new(tmp_path)

    with ThreadPoolExecutor(8) as pool:
        runs = list(pool.map(new_run, range(8)))
    names = sorted(run.path.name for run in runs)
    assert names == sorted(["20261130-061500"] + [f"20261130-061500-{n}" for n in range(2, 9)])
    assert all(run.path.is_dir() for run in runs)


def test_an_empty_named_folder_is_claimed_once(tmp_path):
    (tmp_path / "named").mkdir()
    assert RunDir.new(tmp_path, "named").checkpoints_dir.is_dir()  # claimed by the first
    with pytest.raises(RunDirError, match="already exists"):
        RunDir.new(tmp_path, "named")
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirError, match="already exists"):
        RunDir.new(tmp_path, "file")


def test_opening_what_is_not_a_run_folder_says_why(tmp_path):
    with pytest.raises(RunDirError, match="does not exist"):
        RunDir.open(tmp_path / "nowhere")
    with pytest.raises(RunDirError, match="not a run folder"):
        RunDir.open(tmp_path)
    assert RunDir.find(make_run(tmp_path / "r").path) == RunDir(tmp_path / "r")


def test_the_newest_run_is_found_through_latest_or_by_date(tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(RunDirError, match="no trained run"):
        RunDir.newest(runs)
    old, new = make_run(runs / "old"), make_run(runs / "new")
    make_run(runs / "untrained", checkpoints=())
    later = time.time() + 10
    os.utime(new.checkpoint("best"), (later, later))
    assert RunDir.newest(runs) == new == RunDir.find(None, runs)
    old.point_latest()
    assert (runs / "latest").resolve() == old.path.resolve()
    assert RunDir.newest(runs).path == old.path.resolve()
    new.point_latest()  # replaced, not refused
    assert (runs / "latest").resolve() == new.path.resolve()


def test_best_falls_back_to_last_and_a_missing_checkpoint_is_named(tmp_path):
    run = make_run(tmp_path / "r", checkpoints=("last",))
    assert run.find_checkpoint("best") == run.find_checkpoint("last") == run.checkpoint("last")
    assert run.find_checkpoint(str(run.checkpoint("last"))) == run.checkpoint("last")
    with pytest.raises(RunDirError, match="no checkpoint step-9.pt"):
        run.find_checkpoint("step-9")


def test_checkpoints_round_trip_and_a_bad_one_is_detected(tmp_path):
    run = make_run(tmp_path / "r", checkpoints=())
    state = {"model": {"w": torch.arange(3.0)}, "config": {}, "step": 7}
    path = run.save_checkpoint("last", state)
    assert path == run.checkpoint("last") and run.checkpoints() == [path]
    assert [p.name for p in run.checkpoints_dir.iterdir()] == ["last.pt"]  # no temporary left
    loaded = run.load_checkpoint("last")
    assert loaded["step"] == 7 and torch.equal(loaded["model"]["w"], torch.arange(3.0))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        run.load_checkpoint("last")
