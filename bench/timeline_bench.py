"""What the attention timeline (translator/timeline.py, train.timeline) costs a run.

On a copy of a run folder (its config, tokenizer and last.pt; the original is not touched),
times a validation as training does it without the timeline (`Evaluator.validate`) and the
timeline's own work at a validation (`Timeline.record`: the showcase force-decoded and
appended to timeline.pt, the showcase AER and the AER of the first 200 dev pairs), each the
median of --repeats, alternating. Then projects the cost inside the default 8-minute run: the
timeline's seconds times that run's validations, as a share of its 480 s and in steps (the
time budget counts validations, so time spent there is steps not made), and writes
timeline.pt as that run would (one entry per validation) to state its size.

    python bench/timeline_bench.py --run RUN [--repeats 3] [--steps 3783]

RUN should be a run of configs/default.yaml (the model whose cost is projected). Its weights
matter little for the timeline (a teacher-forced pass costs the same for any weights), more for
validation (greedy decoding of a weak model writes longer outputs).
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from translator.build import build_run
from translator.run_dir import RunDir
from translator.training import Trainer

RESULTS = Path(__file__).resolve().parent / "results"
RUN_SECONDS = 8 * 60  # the default run's budget (train.max_minutes)


def copy_run(source: RunDir, into: Path) -> RunDir:
    """The files a resume reads, copied, so the bench writes nothing into ``source``."""
    copy = RunDir(into / source.path.name)
    copy.checkpoints_dir.mkdir(parents=True)
    shutil.copy(source.config_file, copy.config_file)
    shutil.copytree(source.tokenizer_dir, copy.tokenizer_dir)
    shutil.copy(source.checkpoint("last"), copy.checkpoint("last"))
    return copy


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run folder of configs/default.yaml")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3783,
                        help="steps the default 8-minute run makes (README: 3,783, fp32)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        run_dir = copy_run(RunDir.open(args.run), Path(folder))
        config = run_dir.read_config()
        run = build_run(config, run_dir, resume=True)
        trainer = Trainer(run, resume=True)
        step, timeline = trainer.step, trainer.timeline
        validation, recording = [], []
        for _ in range(args.repeats):
            validation.append(timed(lambda: trainer.evaluator.validate(run.dev_data, step)))
            recording.append(timed(lambda: timeline.record(step)))
        every = config.train.eval_every
        validations = math.ceil(args.steps / every)  # the last at the time limit
        for number in range(1, validations + 1):  # the file as the default run leaves it
            timeline.record(number * every)
        size = run_dir.timeline_file.stat().st_size
        trainer.close()
    seconds = statistics.median(recording)
    per_step = RUN_SECONDS / args.steps
    share = 100 * validations * seconds / RUN_SECONDS
    rows = [
        ("validation without the timeline (median)", f"{statistics.median(validation):.2f} s"),
        ("the timeline's work at a validation (median)", f"{seconds:.2f} s"),
        ("all timings (validation; timeline)", f"{[round(t, 2) for t in validation]}; "
                                               f"{[round(t, 2) for t in recording]}"),
        ("validations in the default run", f"{validations} (every {every} of {args.steps} "
                                           "steps)"),
        ("projected cost in the 8-minute run", f"{validations * seconds:.1f} s = {share:.2f} % "
                                               f"≈ {validations * seconds / per_step:.0f} steps"),
        ("timeline.pt after those validations", f"{size / 1024:.0f} KB"),
    ]
    table = "| measure | value |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "timeline.md").write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
