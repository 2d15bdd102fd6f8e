"""Bad input and faults, as a new user meets them (issue 17): each row of the issue's table
is one sentence on stderr and exit code 2, with nothing already written lost; a full disk
while a checkpoint is written; a process killed (SIGKILL) in the middle of a checkpoint."""

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import translator.checkpoint as checkpoint
import translator.run_dir
from translator.checkpoint import load_checkpoint
from translator.cli import train_main, translate_main
from translator.data import embedded_corpus_dir

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke.yaml"


def one_sentence(stderr: str) -> str:
    """The error line of stderr; fails on a traceback or on several error lines."""
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr[-3000:]
    return errors[0]


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> dict[str, Path]:
    """200 train and 8 dev pairs of the embedded corpus as TSV files (no test split), so that
    a run trains, validates and ends in seconds."""
    folder = tmp_path_factory.mktemp("data")
    paths = {}
    for split, count in (("train", 200), ("dev", 8)):
        lines = (embedded_corpus_dir() / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        paths[split] = folder / f"{split}.tsv"
        paths[split].write_text("".join("\t".join(line.split("\t")[:2]) + "\n"
                                        for line in lines[:count]), encoding="utf-8")
    return paths


def tiny_training(data: dict[str, Path], output: Path, *overrides: str) -> list[str]:
    """train arguments: 4 steps of the smoke model, a validation (and checkpoint) every 2."""
    return ["--config", str(SMOKE), f"train.output_dir={output}", "data.source=files",
            f"data.train_path={data['train']}", f"data.dev_path={data['dev']}",
            "train.max_steps=4", "train.eval_every=2", "train.eval_sentences=4",
            "train.batch_tokens=400", "train.log_every=1", "train.threads=1",
            "train.heatmaps=false", *overrides]


# ---------------------------------------------------------------- the table, row by row


def test_latin1_bytes_on_standard_input(tiny_run):
    result = subprocess.run([sys.executable, "scripts/translate.py", "--run", str(tiny_run)],
                            input=b"namaste\ncaf\xe9\n", capture_output=True, timeout=180,
                            cwd=ROOT)
    assert result.returncode == 2
    assert one_sentence(result.stderr.decode()) == (
        "error: standard input line 2 is not valid UTF-8 (the byte 0xe9); convert it to "
        "UTF-8 first, e.g. with iconv -f latin1 -t utf-8")
    assert result.stdout == b""


def test_latin1_bytes_on_the_command_line(tiny_run, capsys):
    text = os.fsdecode(b"caf\xe9")  # what Python makes of such an argument
    assert translate_main(["--run", str(tiny_run), text]) == 2
    assert "text 1 on the command line is not UTF-8 text" in one_sentence(capsys.readouterr().err)


def test_zero_heads(tmp_path, capsys):
    assert train_main(["--config", str(SMOKE), f"train.output_dir={tmp_path}",
                       "model.heads=0"]) == 2
    assert one_sentence(capsys.readouterr().err) == (
        "error: model: model.heads must be at least 1, not 0")
    assert list(tmp_path.iterdir()) == []  # refused before a run folder was made


def test_a_heatmap_into_a_folder_that_is_not_there(tiny_run, tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "x.png"
    assert translate_main(["--run", str(tiny_run), "नमस्ते", "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    assert one_sentence(captured.err) == (
        f"error: cannot write {target}: the folder {target.parent} does not exist; create it "
        "first or choose another path")
    assert captured.out == "" and not (tmp_path / "no").exists()  # refused before translating


@pytest.mark.parametrize("override, message", [
    ("model.d_model=128", "was trained with d_model 16; --resume keeps the run's model; drop "
     "model.d_model=128 or start a new run"),
    ("data.direction=en-hi", "was trained with direction hi-en; --resume keeps the run's data "
     "source and direction; drop data.direction=en-hi or start a new run"),
])
def test_resume_refuses_what_the_checkpoint_fixes(tiny_run, tmp_path, capsys, override,
                                                  message):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = files_of(run)
    assert train_main(["--resume", str(run), override]) == 2
    assert one_sentence(capsys.readouterr().err) == f"error: {run} {message}"
    assert files_of(run) == before  # nothing written, nothing lost


def test_a_hand_edited_model_key_in_the_runs_config_is_one_sentence(tiny_run, tmp_path,
                                                                     capsys):
    """RUN/config.yaml edited by hand (model.d_model 16 → 32): resuming names the key instead
    of ending in load_state_dict's traceback, and the checkpoint is left as it was."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    config = run / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("d_model: 16", "d_model: 32"),
                      encoding="utf-8")
    checkpoint = (run / "checkpoints" / "last.pt").read_bytes()
    assert train_main(["--resume", str(run)]) == 2
    assert one_sentence(capsys.readouterr().err) == (
        f"error: {run}/config.yaml no longer describes the model its checkpoint holds "
        "(model.d_model 16 in the checkpoint, 32 in config.yaml); undo the edit to "
        "config.yaml, or start a new run with the new model")
    assert (run / "checkpoints" / "last.pt").read_bytes() == checkpoint


def test_a_disk_that_fills_up_while_a_checkpoint_is_written(tiny_data, tmp_path, capsys,
                                                            monkeypatch):
    """The second checkpoint (step 4) meets a full disk after 4,000 bytes: the temporary file
    goes, last.pt and best.pt stay those of step 2, the run stops with exit code 2 and the
    resume command, and the resume (with room again) reaches step 4."""
    real_open, opened = checkpoint._open_temporary, []

    class FullDisk:
        def __init__(self, file) -> None:
            self.file, self.room = file, 4_000

        def write(self, data) -> int:
            if len(data) > self.room:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.room -= len(data)
            return self.file.write(data)

        def __getattr__(self, name):
            return getattr(self.file, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.file.close()

    def open_temporary(path):
        temporary, file = real_open(path)
        opened.append(temporary)
        return (temporary, FullDisk(file)) if len(opened) == 2 else (temporary, file)

    monkeypatch.setattr(checkpoint, "_open_temporary", open_temporary)
    run = tmp_path / "full"
    assert train_main(tiny_training(tiny_data, tmp_path, "train.run_name=full")) == 2
    sentence = one_sentence(capsys.readouterr().err)
    last, best = run / "checkpoints" / "last.pt", run / "checkpoints" / "best.pt"
    size = checkpoint.megabytes(last.stat().st_size)
    assert sentence.startswith(f"error: no space left on the disk for {last}: a checkpoint "
                               f"of this run needs {size} and ")
    assert sentence.endswith(f"are free; the half-written file was removed; {last} from the "
                             "previous save is kept; once there is room, continue with: "
                             f"python scripts/train.py --resume {run}")
    assert not opened[1].exists()
    assert sorted(p.name for p in last.parent.iterdir()) == ["best.pt", "last.pt"]
    assert load_checkpoint(last)["step"] == load_checkpoint(best)["step"] == 2
    monkeypatch.setattr(checkpoint, "_open_temporary", real_open)  # room again
    assert train_main(["--resume", str(run)]) == 0
    assert load_checkpoint(last)["step"] == 4


def test_a_model_too_large_for_the_machine_is_one_sentence_before_allocating(tiny_data,
                                                                             tmp_path, capsys):
    """model.d_model=262144 model.d_ff=262144 (as a new user tried): the sizes are estimated
    and refused before the model is allocated, naming the keys to shrink."""
    assert train_main(tiny_training(tiny_data, tmp_path, "model.d_model=262144",
                                    "model.d_ff=262144", "train.run_name=huge")) == 2
    err = one_sentence(capsys.readouterr().err)
    assert err.startswith("error: this model and a batch need about ") and "GiB free on cpu" in err
    assert err.endswith("shrink model.d_model, model.d_ff, model.layers or train.batch_tokens")
    assert not list((tmp_path / "huge" / "checkpoints").glob("*.pt"))


def test_two_runs_started_in_the_same_second(tiny_data, tmp_path, monkeypatch, capsys):
    clock = types.SimpleNamespace(strftime=lambda _: "20261130-061500")
    monkeypatch.setattr(translator.run_dir, "time", clock)  # the same second, twice
    for _ in range(2):
        assert train_main(tiny_training(tiny_data, tmp_path, "train.max_steps=1",
                                        "train.eval_every=1")) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "20261130-061500"),
                                               str(tmp_path / "20261130-061500-2")]


def test_an_empty_train_file(tiny_data, tmp_path, capsys):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    assert train_main(tiny_training(tiny_data, tmp_path, f"data.train_path={empty}")) == 2
    assert one_sentence(capsys.readouterr().err) == (
        f"error: the train split is empty: data.train_path {empty} holds no sentence pairs; "
        "point data.train_path at a file of pairs")


def test_a_run_without_a_dev_split_saves_last_pt_without_validating(tiny_data, tmp_path,
                                                                    capsys):
    assert train_main(tiny_training(tiny_data, tmp_path, "data.dev_path=null",
                                    "train.run_name=nodev")) == 0
    assert load_checkpoint(tmp_path / "nodev" / "checkpoints" / "last.pt")["step"] == 4
    assert not (tmp_path / "nodev" / "checkpoints" / "best.pt").exists()


def test_any_other_file_a_run_cannot_write_is_one_sentence(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(b"")

    def full_disk(config, resume=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(run / "metrics.jsonl"))

    monkeypatch.setattr("translator.cli.train", full_disk)
    assert train_main(["--config", str(SMOKE)]) == 2
    assert one_sentence(capsys.readouterr().err) == (
        f"error: cannot write {run / 'metrics.jsonl'}: No space left on device; free some space "
        f"(or fix the folder), then continue with: python scripts/train.py --resume {run}")


# ---------------------------------------------------------------- killed mid-checkpoint

# Trains as the command line does, but stalls in the middle of writing its second checkpoint
# (after 20,000 bytes), says so in the file argv[1] and waits there to be killed.
STALL_IN_THE_SECOND_CHECKPOINT = """
import sys, time
from pathlib import Path
import translator.checkpoint as checkpoint
from translator.cli import train_main

real_open, opened = checkpoint._open_temporary, []

class Stalling:
    def __init__(self, file, temporary):
        self.file, self.temporary, self.written = file, temporary, 0
    def write(self, data):
        written = self.file.write(data)
        self.written += written
        if self.written > 20_000:
            self.file.flush()
            Path(sys.argv[1]).write_text(str(self.temporary))
            time.sleep(600)
        return written
    def __getattr__(self, name):
        return getattr(self.file, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.file.close()

def open_temporary(path):
    temporary, file = real_open(path)
    opened.append(temporary)
    return (temporary, Stalling(file, temporary)) if len(opened) == 2 else (temporary, file)

checkpoint._open_temporary = open_temporary
sys.exit(train_main(sys.argv[2:]))
"""


def test_sigkill_in_the_middle_of_a_checkpoint_keeps_the_previous_one(tiny_data, tmp_path):
    marker, run = tmp_path / "stalled", tmp_path / "killed"
    process = subprocess.Popen(
        [sys.executable, "-c", STALL_IN_THE_SECOND_CHECKPOINT, str(marker),
         *tiny_training(tiny_data, tmp_path, "train.run_name=killed")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not marker.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert marker.exists(), process.communicate(timeout=60)[1].decode()[-3000:]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    half_written = Path(marker.read_text())
    assert half_written.parent == run / "checkpoints" and half_written.stat().st_size > 20_000
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == 2
    result = subprocess.run([sys.executable, "-m", "translator", "train", "--resume", str(run)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == 4
    assert not half_written.exists()  # the next write removed the leftover
