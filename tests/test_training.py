"""Training end to end on the smoke config: the run folder, resume, signals, bad checkpoints,
NaN losses, the caller's config left alone, and two processes under torchrun."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import translator.evaluator as evaluator
import translator.recipe as recipe
import translator.training as training
from translator.build import build_run
from translator.checkpoint import CheckpointError, load_checkpoint
from translator.cli import evaluate_main, plot_run_main
from translator.config import load_config
from translator.corpus import SHOWCASE
from translator.data import load_splits
from translator.explorer import read_explorer_data
from translator.run_dir import RunDir, RunDirError
from translator.timeline import read_timeline
from translator.training import TrainingError, train
from translator.translate import Translator

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke.yaml"


def smoke_config(output_dir: Path, *overrides: str):
    """The smoke config; the heatmaps (slow for a babbling untrained model) only when asked."""
    return load_config(SMOKE, [f"train.output_dir={output_dir}", "train.heatmaps=false",
                               *overrides])


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def run_command(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """python -m translator train ARGS, as a user types it."""
    return subprocess.run([sys.executable, "-m", "translator", "train", *args,
                           "train.heatmaps=false"],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> Path:
    """Trained as the command line trains: training, then the curves and the heatmaps."""
    output = tmp_path_factory.mktemp("runs")
    run_dir, code = train(smoke_config(output, "train.run_name=smoke",
                                                "train.heatmaps=true"))
    assert code == 0
    return run_dir


def test_smoke_training_lowers_the_loss_and_writes_a_run_folder(smoke_run):
    for name in ("config.yaml", "train.log", "metrics.jsonl", "test_scores.json",
                 "test_hypotheses.txt", "tokenizer/joint.model", "tokenizer/tokenizer.json",
                 "checkpoints/best.pt", "checkpoints/last.pt", "heatmaps/showcase-1.png",
                 "heatmaps/showcase-1.json", "heatmaps/showcase-1-heads.png",
                 "heatmaps/showcase-1.html", "curves.png"):
        assert (smoke_run / name).is_file(), name
    losses = [m["loss"] for m in metrics(smoke_run) if m["kind"] == "train"]
    assert losses[-1] < losses[0] - 1.0
    validations = [m for m in metrics(smoke_run) if m["kind"] == "validation"]
    assert validations and all("dev_chrf" in m and "dev_bleu" in m for m in validations)
    assert validations[-1]["dev_loss"] < validations[0]["dev_loss"]
    scores = json.loads((smoke_run / "test_scores.json").read_text())
    assert scores["sentences"] > 250 and "nrefs:1" in scores["chrf_signature"]
    assert (smoke_run.parent / "latest").resolve() == smoke_run.resolve()
    state = load_checkpoint(smoke_run / "checkpoints" / "last.pt")
    assert state["step"] == 30 and state["config"]["model"]["source_vocab_size"] > 0


def test_the_showcase_family_and_first_tries_are_checked_at_the_end(smoke_run):
    """held_out.json: every family variant and first try with the model's output and its
    check, the summary in metrics.jsonl and the log."""
    held = json.loads((smoke_run / "held_out.json").read_text(encoding="utf-8"))
    family = [row for row in held["sentences"] if row["set"] == "family"]
    tries = [row for row in held["sentences"] if row["set"] == "first_tries"]
    assert len(family) == held["summary"]["family_sentences"] >= 30 and len(tries) == 60
    for row in family:
        assert row["whole"] == (not row["missing"] and not row["repeated"]
                                and row["route_in_order"] is not False)
    assert held["summary"]["family_whole"] == sum(row["whole"] for row in family)
    assert held["summary"]["first_tries_right"] == sum(row["right"] for row in tries)
    record = [m for m in metrics(smoke_run) if m["kind"] == "held_out"][-1]
    assert record["family_whole"] == held["summary"]["family_whole"]
    assert "showcase family:" in (smoke_run / "train.log").read_text(encoding="utf-8")


def test_the_showcase_pages_hold_the_heatmaps_numbers_and_the_curves_are_drawn(smoke_run):
    """At the end of training: showcase-N.html for each showcase sentence, with the numbers of
    showcase-N.json (the PNG's view and every head), and curves.png."""
    for number in range(1, len(SHOWCASE) + 1):
        heatmaps = smoke_run / "heatmaps"
        record = json.loads((heatmaps / f"showcase-{number}.json").read_text(encoding="utf-8"))
        data = read_explorer_data(heatmaps / f"showcase-{number}.html")
        for key in ("source", "translation", "reference", "source_words", "target_words"):
            assert data[key] == record[key], key
        assert record["reference"] == SHOWCASE[number - 1][1]  # the smoke model is hi-en
        assert data["default_layer"] == record["layer"]
        assert data["weights"]["mean"][record["layer"]] == record["weights"]
        assert data["weights"]["heads"] == record["all_heads"]
    assert (smoke_run / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_run_redraws_the_curves_and_the_showcase(smoke_run, tmp_path, monkeypatch,
                                                      capsys):
    copy = tmp_path / "smoke"
    shutil.copytree(smoke_run, copy)
    shutil.rmtree(copy / "heatmaps")
    (copy / "curves.png").unlink()
    assert plot_run_main([str(copy), "--curves-only"]) == 0
    assert (copy / "curves.png").stat().st_size > 0 and not (copy / "heatmaps").exists()
    # one short sentence keeps the babbling smoke model quick
    monkeypatch.setattr("translator.corpus.SHOWCASE", [("मुंबई की ट्रेन", "the train to Mumbai")])
    assert plot_run_main([str(copy), "--device", "cpu", "--beam", "1"]) == 0
    followed = len(read_timeline(copy / "timeline.pt"))  # the run's timeline: one GIF each
    assert sorted(p.name for p in (copy / "heatmaps").iterdir()) == [
        "showcase-1-heads.png", "showcase-1-layers.png", "showcase-1.html", "showcase-1.json",
        "showcase-1.png", "showcase-1.svg", *(f"timeline-{i}.gif" for i in range(1, followed + 1))]
    record = json.loads((copy / "heatmaps" / "showcase-1.json").read_text(encoding="utf-8"))
    assert record["source"] == "मुंबई की ट्रेन" and record["beam_size"] == 1
    assert read_explorer_data(copy / "heatmaps" / "showcase-1.html")["weights"]["mean"][
        record["layer"]] == record["weights"]
    capsys.readouterr()
    shutil.rmtree(copy / "checkpoints")  # a run stopped before its first checkpoint
    shutil.rmtree(copy / "heatmaps")
    assert plot_run_main([str(copy)]) == 0
    assert "no checkpoint" in capsys.readouterr().err and not (copy / "heatmaps").exists()
    assert plot_run_main([str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_test_scores_are_the_translators_and_evaluates(smoke_run, capsys):
    """One decoding path: the test split scored at the end of training is what the Translator
    (and the evaluate command) makes of it with the best checkpoint."""
    scores = json.loads((smoke_run / "test_scores.json").read_text())
    hypotheses = (smoke_run / "test_hypotheses.txt").read_text(encoding="utf-8").splitlines()
    translator = Translator.from_run(smoke_run, device="cpu")
    test = load_splits(translator.config.data).splits["test"]
    translations = translator.translate([p.source for p in test], beam_size=scores["beam_size"],
                                        batch_size=evaluator.DECODE_BATCH_SIZE,
                                        need_attention=False)
    assert hypotheses == [t.text for t in translations]
    assert evaluate_main(["--run", str(smoke_run), "--beam", str(scores["beam_size"]),
                          "--batch-size", str(evaluator.DECODE_BATCH_SIZE), "--json",
                          "--out", str(smoke_run / "evaluate.txt")]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert round(evaluated["bleu"], 2) == scores["bleu"]
    assert round(evaluated["chrf"], 2) == scores["chrf"]
    assert evaluated["chrf_signature"] == scores["chrf_signature"]


def test_training_leaves_the_callers_config_alone(tmp_path):
    config = smoke_config(tmp_path, "train.run_name=untouched")
    run = build_run(config, RunDir(tmp_path / "untouched"))
    assert config.model.source_vocab_size == 0 and config == smoke_config(
        tmp_path, "train.run_name=untouched")
    assert run.config.model.source_vocab_size == run.tokenizer.source_vocab_size > 0
    assert run.model.config == run.config.model and run.config.train is config.train


def test_an_existing_run_folder_is_never_overwritten(smoke_run):
    with pytest.raises(RunDirError, match="already exists"):
        train(smoke_config(smoke_run.parent, "train.run_name=smoke"))
    assert load_checkpoint(smoke_run / "checkpoints" / "last.pt")["step"] == 30


def test_resume_is_exact(tmp_path):
    straight, _ = train(smoke_config(tmp_path, "train.run_name=straight", "train.max_steps=12",
                                     "train.eval_every=100"))
    split, _ = train(smoke_config(tmp_path, "train.run_name=split", "train.max_steps=6",
                                  "train.eval_every=100"))
    resumed_config = load_config(split / "config.yaml", ["train.max_steps=12"])
    train(resumed_config, resume=split)
    a = load_checkpoint(straight / "checkpoints" / "last.pt")
    b = load_checkpoint(split / "checkpoints" / "last.pt")
    assert a["step"] == b["step"] == 12
    for name, weight in a["model"].items():
        assert torch.equal(weight, b["model"][name]), name
    assert a["sampler"] == b["sampler"]


def test_evaluate_reads_the_test_split_from_the_cache_and_never_the_training_split(
        smoke_run, capsys, monkeypatch):
    """With the run's prepared data in the cache, evaluate reads the clean test split from
    there: reading the raw data again (the training split with it) would fail here."""
    expected = json.loads((smoke_run / "test_scores.json").read_text())

    def no_raw_data(*args, **kwargs):
        raise AssertionError("evaluate read the raw data (and with it the training split)")

    monkeypatch.setattr("translator.encoded.load_splits", no_raw_data)
    assert evaluate_main(["--run", str(smoke_run), "--json", "--batch-size",
                          str(evaluator.DECODE_BATCH_SIZE)]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["sentences"] == expected["sentences"]
    assert round(scores["chrf"], 2) == expected["chrf"]


def test_a_nan_loss_stops_with_a_clear_message_and_keeps_the_last_checkpoint(tmp_path,
                                                                               monkeypatch):
    run_dir, _ = train(smoke_config(tmp_path, "train.run_name=nan", "train.max_steps=5",
                                    "train.eval_every=5"))
    before = (run_dir / "checkpoints" / "last.pt").read_bytes()
    real_loss = recipe.token_loss
    monkeypatch.setattr(recipe, "token_loss", lambda *a, **k: real_loss(*a, **k) * float("nan"))
    config = load_config(run_dir / "config.yaml", ["train.max_steps=10"])
    with pytest.raises(TrainingError, match="loss became nan at step 6"):
        train(config, resume=run_dir)
    assert (run_dir / "checkpoints" / "last.pt").read_bytes() == before


def test_corrupt_checkpoints_are_detected(smoke_run, tmp_path):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes((smoke_run / "checkpoints" / "last.pt").read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(truncated)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(garbage)
    # through the command line: one sentence, exit code 2, nothing else touched
    copy = tmp_path / "copy"
    shutil.copytree(smoke_run, copy)
    (copy / "checkpoints" / "last.pt").write_bytes(truncated.read_bytes())
    result = run_command("--resume", str(copy), "train.max_steps=40")
    assert result.returncode == 2
    assert "corrupt or truncated" in result.stderr and "Traceback" not in result.stderr
    assert (copy / "checkpoints" / "best.pt").read_bytes() == (
        smoke_run / "checkpoints" / "best.pt").read_bytes()


def test_bad_config_and_unknown_run_folder_on_the_command_line(tmp_path):
    result = run_command("--config", str(SMOKE), "train.max_stepz=3")
    assert result.returncode == 2 and "train.max_stepz" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_command("--resume", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = run_command("--resume", str(tmp_path))
    assert result.returncode == 2 and "not a run folder" in result.stderr


def test_sigint_saves_a_checkpoint_that_resumes(tmp_path):
    run_dir = tmp_path / "interrupted"
    process = subprocess.Popen(
        [sys.executable, "-m", "translator", "train", "--config", str(SMOKE),
         f"train.output_dir={tmp_path}", "train.run_name=interrupted", "train.max_steps=100000",
         "train.eval_every=100000", "train.log_every=1", "train.heatmaps=false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while time.time() < deadline:  # wait until it is really training
        if (run_dir / "metrics.jsonl").exists() and len(metrics(run_dir)) >= 3:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, stderr
    assert "stopped by SIGINT" in stderr and "Traceback" not in stderr
    step = load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"]
    assert step >= 3
    result = run_command("--resume", str(run_dir), f"train.max_steps={step + 3}",
                        "train.eval_every=1000")
    assert result.returncode == 0, result.stderr
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == step + 3


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_two_processes_under_torchrun_match_one_process(tmp_path):
    common = ["--config", str(SMOKE), f"train.output_dir={tmp_path}", "train.max_steps=4",
              "train.eval_every=4", "train.log_every=1", "train.eval_sentences=5",
              "search.beam_size=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # --standalone: a rendezvous on a free local port (a fixed one may be taken)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=2", "-m", "translator", "train", *common,
               "train.run_name=two", "train.heatmaps=false"]
    try:
        two = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env=env)
    except subprocess.TimeoutExpired as stuck:  # say where it stopped
        pytest.fail(f"torchrun did not finish in 300 s; its output ended: "
                    f"{(stuck.stderr or b'')[-3000:]!r}")
    assert two.returncode == 0, two.stderr[-2000:]
    one = run_command(*common, "train.run_name=one", "train.accumulate=2")
    assert one.returncode == 0, one.stderr[-2000:]
    losses = {name: [m["loss"] for m in metrics(tmp_path / name) if m["kind"] == "train"]
              for name in ("one", "two")}
    assert len(losses["two"]) == 4
    assert losses["two"] == pytest.approx(losses["one"], rel=1e-3)
    dev = {name: [m["dev_loss"] for m in metrics(tmp_path / name) if m["kind"] == "validation"]
           for name in ("one", "two")}
    assert dev["two"] == pytest.approx(dev["one"], rel=1e-3)


def test_a_log_file_gets_one_plain_line_per_log_step_and_no_redraws(tmp_path):
    """stderr redirected to a file (CI, nohup): no progress-bar redraws, a line per log step."""
    done = run_command("--config", str(SMOKE), f"train.output_dir={tmp_path}",
                       "train.run_name=logged", "train.max_steps=12", "train.log_every=4",
                       "train.eval_every=100")
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("step ")
                and "/12 " in line]
    assert [line.split()[1] for line in progress] == ["4/12", "8/12", "12/12"]


def test_the_time_limit_drives_the_linear_schedule_to_zero(tmp_path, monkeypatch,
                                                          stepping_clock):
    """train.max_minutes with the linear schedule: the run stops on time, and the learning
    rate logged at its last step is (nearly) zero however many steps that was. The loop's
    clock ticks 0.5 s a call (a few calls a step), so the step count does not depend on the
    machine's speed."""
    monkeypatch.setattr(training, "time", stepping_clock(0.5))
    run_dir, code = train(smoke_config(tmp_path, "train.run_name=timed", "train.max_steps=100000",
                                       "train.max_minutes=0.15", "train.schedule=linear",
                                       "train.warmup_steps=2", "train.log_every=1",
                                       "train.eval_every=100000"))
    assert code == 0
    lines = [m for m in metrics(run_dir) if m["kind"] == "train"]
    assert 2 < lines[-1]["step"] < 100000
    assert lines[-1]["lr"] < 0.1 * max(m["lr"] for m in lines)
