"""The training loop: steps, validates, keeps the best checkpoints, stops (at max_steps, an
early stop, the time limit or a signal) and scores the test split.

    run = build_run(config, RunDir.new("runs"))   # translator.build: data, model, optimiser
    trainer = Trainer(run)
    if trainer.fit() == 0:                        # 0: finished; 128 + N: stopped by signal N
        trainer.score_test()                      # test_scores.json with the best checkpoint

`train` does all of it (and writes config.yaml, runs/latest, the curves and the showcase
heatmaps), as the command line does. One code path for CPU and GPU, one process or many
(torchrun + DistributedDataParallel, translator.distributed). The recipe it follows (schedule,
loss, optimiser, averaging) is translator.recipe; scoring is translator.evaluator.
"""

from __future__ import annotations

import gc
import json
import math
import random
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from translator.batching import Batch
from translator.build import Run, build_run, new_run_dir
from translator.config import Config, config_to_dict
from translator.device import device_rng_state, set_device_rng_state
from translator.distributed import (
    any_process,
    close_distributed,
    data_parallel,
    init_distributed,
    mean_over_processes,
)
from translator.drawing import draw_curves, draw_showcase
from translator.dropout import dropout_state, set_dropout_state
from translator.errors import TranslatorError
from translator.evaluator import Evaluator, other_ways
from translator.held_out import describe, score_held_out
from translator.model_card import write_model_card
from translator.recipe import average_weights, batch_loss
from translator.reporting import say
from translator.resume import check_resume
from translator.run_dir import RunDir
from translator.tensorboard_log import RunBoard, summary_writer_class
from translator.timeline import Timeline


class TrainingError(TranslatorError):
    """Training cannot go on (a NaN loss, an unusable run folder, ...)."""


# ---------------------------------------------------------------- the loop


class Trainer:
    """Steps, validates, keeps the best checkpoints and stops; scores the test split."""

    def __init__(self, run: Run, resume: bool = False) -> None:
        self.run = run
        self.cfg = run.config.train
        self.step = 0
        self.best: list[tuple[float, int]] = []  # (score, step) of the kept bests, best first
        self.evaluations_without_improvement = 0
        self.stop_signal: int | None = None
        self.snapshots: list[dict[str, torch.Tensor]] = []  # for average_last
        self.board = RunBoard(run.run_dir.tensorboard_dir) if (
            run.main and self.cfg.tensorboard) else None
        # On a CPU the search runs in fp32 even when training runs in bf16: one sentence's
        # small matmuls gain nothing from bf16 there (beam 5 was 1.4× slower), and the test
        # score is then what translate.py, which decodes in fp32, gives
        self.evaluator = Evaluator(run.model, run.tokenizer, run.config, run.device,
                                   run.precision if run.device.type != "cpu" else "fp32")
        if resume:
            self.load_state(run.run_dir.load_checkpoint("last", run.device))
        # the showcase's attention at each validation (timeline.pt; a resume goes on with it)
        self.timeline = Timeline(run.model, run.tokenizer, run.config, run.device, run.run_dir,
                                 self.step if resume else None) if (
            run.main and run.config.train.timeline is not False) else None
        compiled = torch.compile(run.model) if self.cfg.compile else run.model
        self.train_model: nn.Module = data_parallel(compiled, run.device)

    # -- checkpoints

    def state(self) -> dict[str, Any]:
        """Everything an exact resume needs, and the config and tokenizer it belongs to."""
        run = self.run
        return {
            "model": run.model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "scheduler": run.scheduler.state_dict(),
            "scaler": run.scaler.state_dict(),
            "sampler": run.sampler.state_dict(),
            "step": self.step,
            "seconds": run.budget.seconds,
            "best": self.best,
            "evaluations_without_improvement": self.evaluations_without_improvement,
            "rng": {"python": random.getstate(), "torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                    "dropout": dropout_state(), "device": device_rng_state(run.device)},
            "config": config_to_dict(run.config),
            "tokenizer": run.tokenizer.fingerprint(),
            # what the model card says of the run beside its config
            "facts": {"device": str(run.device), "processes": run.world_size,
                      **{f"{split}_pairs": len(pairs) for split, pairs in run.splits.items()}},
        }

    def load_state(self, state: dict[str, Any]) -> None:
        run = self.run
        if state.get("tokenizer") != run.tokenizer.fingerprint():
            raise TrainingError(f"the checkpoint in {run.run_dir} was trained with another "
                                "tokenizer than the one in its folder; resume the run it came "
                                "from")
        self.check_model_keys(state)
        run.model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])
        run.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:  # empty when the run was not in fp16: then the scaler starts afresh
            run.scaler.load_state_dict(state["scaler"])
        run.sampler.load_state_dict(state["sampler"])
        self.step = state["step"]
        run.budget.seconds = state.get("seconds", 0.0)  # older checkpoints did not count
        self.best = [tuple(b) for b in state["best"]]
        self.evaluations_without_improvement = state["evaluations_without_improvement"]
        random.setstate(state["rng"]["python"])
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if "dropout" in state["rng"]:  # checkpoints before translator.dropout lack it
            set_dropout_state(state["rng"]["dropout"])
        set_device_rng_state(run.device, state["rng"].get("device"))  # MPS's dropout stream
        if torch.cuda.is_available() and state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])

    def check_model_keys(self, state: dict[str, Any]) -> None:
        """Refuse, in one sentence, a model section that differs from the checkpoint's (a
        hand-edited RUN/config.yaml): its weights would not fit."""
        saved = (state.get("config") or {}).get("model") or {}
        now = config_to_dict(self.run.config)["model"]
        changed = [f"model.{key} {saved[key]} in the checkpoint, {now[key]} in config.yaml"
                   for key in now if key in saved and saved[key] != now[key]]
        if changed:
            raise TrainingError(f"{self.run.run_dir}/config.yaml no longer describes the model "
                                f"its checkpoint holds ({'; '.join(changed)}); undo the edit "
                                "to config.yaml, or start a new run with the new model")

    def save(self, name: str, also: tuple[str, ...] = ()) -> Path:
        """checkpoints/NAME.pt (written by the main process only); the names in ``also``
        become hard links of the same file."""
        if self.run.main:
            return self.run.run_dir.save_checkpoint(name, self.state(), also)
        return self.run.run_dir.checkpoint(name)

    # -- one optimiser step

    def batches(self) -> Iterator[Batch]:
        """Batches forever, epoch after epoch; the sampler remembers where it is."""
        run = self.run
        while True:
            for indices in run.sampler:
                yield run.train_data.batch(indices, run.tokenizer, run.device)

    def train_step(self, batches: Iterator[Batch]) -> tuple[float, int]:
        """Forward, backward (over ``accumulate`` batches) and update. Returns the smoothed
        loss per target token (averaged over batches and processes, as the gradient is) and
        the number of source+target tokens seen by all processes."""
        run, cfg, pad_id = self.run, self.cfg, self.run.tokenizer.pad_id
        self.train_model.train()
        run.optimizer.zero_grad(set_to_none=True)
        batch_losses, tokens = [], 0
        for micro_step in range(cfg.accumulate):
            batch = next(batches)
            last = micro_step == cfg.accumulate - 1
            sync = nullcontext() if last or run.world_size == 1 else self.train_model.no_sync()
            with sync:
                loss = batch_loss(self.train_model, batch, run.tokenizer, cfg, run.device,
                                  run.precision)
                run.scaler.scale(loss / cfg.accumulate).backward()
            batch_losses.append(loss.item())
            tokens += batch.num_target_tokens + int((batch.source != pad_id).sum())
        mean_loss = mean_over_processes(sum(batch_losses) / len(batch_losses), run.device)
        if not math.isfinite(mean_loss):
            raise TrainingError(
                f"the loss became {mean_loss} at step {self.step + 1}; the last good "
                f"checkpoint is kept in {run.run_dir.checkpoints_dir}; lower "
                "train.learning_rate or raise train.warmup_steps, then --resume")
        run.scaler.unscale_(run.optimizer)
        if cfg.clip_norm > 0:
            nn.utils.clip_grad_norm_(run.model.parameters(), cfg.clip_norm)
        run.scaler.step(run.optimizer)
        run.scaler.update()
        run.scheduler.step()
        self.step += 1
        return mean_loss, tokens * run.world_size

    # -- validation

    def score_key(self, record: dict[str, Any]) -> float:
        """The early-stopping metric of a validation, signed so that higher is better; for a
        run of both directions, its hi→en score (the plain names), as a hi-en run picks."""
        metric = self.cfg.early_stopping_metric
        return -record["dev_loss"] if metric == "loss" else record[f"dev_{metric}"]

    def count_improvement(self, record: dict[str, Any]) -> bool:
        """True if the validation beats every earlier one; counts validations without an
        improvement for ``patience``."""
        improved = not self.best or self.score_key(record) > self.best[0][0]
        self.evaluations_without_improvement = (
            0 if improved else self.evaluations_without_improvement + 1)
        return improved

    def keep_best_checkpoints(self, record: dict[str, Any]) -> None:
        """Enter the validation into the ``keep_best`` best kept; with keep_best > 1 its
        weights are saved as step-N.pt and those it pushes out are deleted."""
        keep, key = self.cfg.keep_best, self.score_key(record)
        if len(self.best) >= keep and key <= self.best[-1][0]:
            return
        ranked = sorted(self.best + [(key, self.step)], reverse=True)
        self.best, dropped = ranked[:keep], ranked[keep:]
        if self.run.main and keep > 1:
            self.save(f"step-{self.step}")
            for _, step in dropped:
                self.run.run_dir.checkpoint(f"step-{step}").unlink(missing_ok=True)

    def validate_and_save(self) -> bool:
        """Validate on the main process, save last.pt (and best.pt when it is the best);
        True when early stopping says stop."""
        stop = False
        if self.run.main and not self.run.dev_data.pairs:  # no dev split: nothing to score
            self.count_time()
            self.save("last")
        elif self.run.main:
            record = self.evaluator.validate(self.run.dev_data, self.step)
            if self.timeline is not None:  # alignment AERs join the validation's record
                record.update(self.timeline.record(self.step))
            improved = self.count_improvement(record)
            self.keep_best_checkpoints(record)
            self.write_metrics(record)
            if self.board is not None:
                self.board.log_validation(record, self.run.model, self.run.tokenizer,
                                          self.run.config, self.run.device)
            say(f"step {self.step}: dev loss {record['dev_loss']:.3f}  ppl "
                f"{record['dev_perplexity']:.1f}  BLEU {record['dev_bleu']:.1f}  chrF "
                f"{record['dev_chrf']:.1f}" + other_ways(record, self.evaluator.direction)
                + ("  (best)" if improved else ""))
            self.count_time()
            self.save("last", also=("best",) if improved else ())  # best.pt: a link, no copy
            self.remember_weights()
            patience = self.cfg.patience
            stop = patience > 0 and self.evaluations_without_improvement >= patience
        return any_process(stop, self.run.device)

    # -- the loop

    def write_metrics(self, record: dict[str, Any]) -> None:
        if self.run.main:
            with open(self.run.run_dir.metrics_file, "a", encoding="utf-8") as file:
                file.write(json.dumps(record) + "\n")

    def _handle_signal(self, signum, frame) -> None:  # noqa: ARG002 (signal API)
        self.stop_signal = signum

    def fit(self) -> int:
        """Train to max_steps (or an early stop, a time limit, a signal). Returns the exit
        code: 0 when finished, 128 + signal number when stopped by a signal."""
        previous = {s: signal.signal(s, self._handle_signal)
                    for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._loop()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _loop(self) -> int:
        run, cfg = self.run, self.cfg
        say(f"run folder: {run.run_dir}  |  {run.model.num_parameters():,} parameters  |  "
            f"{len(run.train_data.pairs):,} training pairs  |  device {run.device}, "
            f"{run.precision} ({run.precision_reason}), {run.world_size} process(es)")
        batches = self.batches()
        self.bar = bar = self.progress_bar()
        window_start, window_tokens = time.time(), 0
        self.counted_until = time.time()
        while self.step < cfg.max_steps:
            loss, tokens = self.train_step(batches)
            window_tokens += tokens
            if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                self.log_progress(bar, loss, window_tokens / max(1e-9, time.time() - window_start))
                window_start, window_tokens = time.time(), 0
            out_of_time = any_process(run.budget.out_of_time, run.device)
            if self.step % cfg.eval_every == 0 or self.step == cfg.max_steps or out_of_time:
                if self.validate_and_save():
                    say(f"early stop: no better dev {cfg.early_stopping_metric} in "
                        f"{cfg.patience} validations")
                    break
            if out_of_time:
                say(f"time limit of {cfg.max_minutes:g} minutes reached at step {self.step}")
                break
            if any_process(self.stop_signal is not None, run.device):
                code = self.stop_by_signal()
                bar.close()
                return code
            self.count_time()
        bar.close()
        self.average_last_validations()
        return 0

    def progress_bar(self) -> tqdm:
        """Steps out of max_steps, or, with a time limit, seconds out of max_minutes (so the
        ETA is the time limit's); none when stderr is not a terminal (a log file, CI): there
        log_progress prints one plain line per log step instead of carriage-return redraws."""
        run, cfg = self.run, self.cfg
        timed = cfg.max_minutes > 0
        return tqdm(total=round(cfg.max_minutes * 60) if timed else cfg.max_steps,
                    initial=round(run.budget.seconds) if timed else self.step,
                    unit="s" if timed else "step", desc="training", dynamic_ncols=True,
                    disable=not run.main or not sys.stderr.isatty())

    def count_time(self) -> None:
        """Count the wall time since the last count (a step, its validation) into the budget:
        at the end of each step, and before each save, so that a checkpoint holds all the
        time spent up to it and a resumed run's budget is that of one run."""
        now = time.time()
        self.advance(self.bar, now - self.counted_until)
        self.counted_until = now

    def advance(self, bar: tqdm, seconds: float) -> None:
        """Count a step's wall time (validation included) into the budget and the bar."""
        before = self.run.budget.seconds
        self.run.budget.seconds += seconds
        if self.cfg.max_minutes > 0:
            bar.update(round(self.run.budget.seconds) - round(before))
        else:
            bar.update(1)

    def log_progress(self, bar: tqdm, loss: float, speed: float) -> None:
        lr = self.run.scheduler.get_last_lr()[0]
        if bar.disable:
            if self.run.main:
                print(f"step {self.step}/{self.cfg.max_steps}  loss {loss:.3f}  lr {lr:.2e}  "
                      f"tok/s {speed:,.0f}  {self.run.budget.seconds / 60:.1f} min",
                      file=sys.stderr, flush=True)
        else:
            bar.set_postfix(step=self.step, loss=f"{loss:.3f}", lr=f"{lr:.2e}",
                            tok_s=f"{speed:,.0f}")
        record = {"kind": "train", "step": self.step, "loss": round(loss, 4), "lr": lr,
                  "tokens_per_second": round(speed),
                  "epoch": self.run.sampler.state_dict().get("epoch", 0)}
        self.write_metrics(record)
        if self.board is not None:
            self.board.log_train(record)

    def remember_weights(self) -> None:
        """Keep a CPU copy of the weights of each of the last ``average_last`` validations."""
        if self.cfg.average_last >= 2 and self.run.main:
            self.snapshots.append({k: v.detach().to("cpu", copy=True)
                                   for k, v in self.run.model.state_dict().items()})
            del self.snapshots[: -self.cfg.average_last]

    def average_last_validations(self) -> None:
        """Average the remembered weights (checkpoint averaging), validate the average and
        keep it as averaged.pt, and as best.pt when it beats every validation; the model then
        goes back to its last weights (those of last.pt)."""
        if not self.run.main or len(self.snapshots) < 2:
            return
        model = self.run.model
        last = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(average_weights(self.snapshots))
        record = {**self.evaluator.validate(self.run.dev_data, self.step), "kind": "averaged",
                  "averaged": len(self.snapshots)}
        improved = self.score_key(record) > self.best[0][0]
        self.write_metrics(record)
        say(f"average of the last {len(self.snapshots)} validations: dev BLEU "
            f"{record['dev_bleu']:.1f}  chrF {record['dev_chrf']:.1f}"
            + other_ways(record, self.evaluator.direction) + ("  (best)" if improved else ""))
        self.save("averaged")
        if improved:
            self.best.insert(0, (self.score_key(record), self.step))
            self.save("best")
        model.load_state_dict(last)

    def stop_by_signal(self) -> int:
        """Save last.pt and say how to resume; the exit code is 128 + the signal number."""
        self.count_time()
        path = self.save("last")
        name = signal.Signals(self.stop_signal).name
        say(f"stopped by {name} at step {self.step}; checkpoint saved to {path}; continue with: "
            f"python scripts/train.py --resume {self.run.run_dir}")
        return 128 + self.stop_signal

    def validate_parent(self) -> None:
        """A fine-tune's starting point: the parent's weights on the new dev split, before
        the first step (a "parent" record in metrics.jsonl, not a candidate for best.pt)."""
        if self.run.main and self.run.dev_data.pairs:
            record = {**self.evaluator.validate(self.run.dev_data, 0), "kind": "parent"}
            self.write_metrics(record)
            say(f"the parent on the new dev split: loss {record['dev_loss']:.3f}  BLEU "
                f"{record['dev_bleu']:.1f}  chrF {record['dev_chrf']:.1f}"
                + other_ways(record, self.evaluator.direction))

    # -- the end of a run

    def score_test(self) -> dict[str, Any]:
        """Score the test split with the best checkpoint (`Evaluator.score_test`)."""
        run = self.run
        if not run.main:
            return {}
        best = run.run_dir.checkpoint("best")
        if best.exists():
            run.model.load_state_dict(run.run_dir.load_checkpoint("best", run.device)["model"])
        if not run.splits["test"]:
            return {}
        scores = self.evaluator.score_test(run.splits["test"], run.run_dir)
        self.write_metrics({"kind": "test", "step": self.step, **scores})
        say(f"test split ({scores['sentences']} sentences, beam {scores['beam_size']}): BLEU "
            f"{scores['bleu']:.1f}  chrF {scores['chrf']:.1f}"
            + other_ways(scores, self.evaluator.direction, ""))
        if self.cfg.heatmaps:  # the showcase's family goes with the showcase's pictures
            self.score_held_out()
        return scores

    def score_held_out(self) -> None:
        """A model that translates Hindi into English: the showcase family and the first
        tries (translator.held_out) with the run's search, into held_out.json, the metrics
        and one line of the log."""
        direction = self.evaluator.direction
        if not (direction.both or direction.name == "hi-en"):
            return
        language = "en" if direction.both else None
        summary, rows = score_held_out(lambda texts: self.evaluator.translate(texts, language))
        self.run.run_dir.held_out_file.write_text(
            json.dumps({"summary": summary, "sentences": rows}, ensure_ascii=False, indent=1)
            + "\n", encoding="utf-8")
        self.write_metrics({"kind": "held_out", "step": self.step, **summary})
        say(describe(summary))

    def close(self) -> None:
        # DistributedDataParallel's reducer holds the process group: freed later (with the
        # trainer, after the group is destroyed and a peer has exited) its gloo threads can
        # wait forever, so it goes first, while every process is still here
        self.train_model = self.run.model
        if self.board is not None:
            self.board.close()
        gc.collect()
        close_distributed()


def train(config: Config, resume: str | Path | None = None) -> tuple[Path, int]:
    """Train a model as ``config`` says (or continue the run folder ``resume``), score the
    test split, draw the learning curves and (unless train.heatmaps is off) the showcase
    heatmaps and explorer pages; returns the run folder and the exit code (0: finished;
    128 + N: stopped by signal N). ``config`` is not changed. The command line calls this,
    so the Python API and `python scripts/train.py` write the same run folder."""
    rank, _ = init_distributed()
    if config.train.tensorboard:  # a missing package is said before the data is prepared
        summary_writer_class()
    run_dir = RunDir(resume) if resume is not None else new_run_dir(config.train, rank)
    if resume is not None:  # overrides of what the checkpoint fixes are refused by name
        check_resume(RunDir.open(resume).read_config(), config, resume)
    if rank == 0:
        run_dir.path.mkdir(parents=True, exist_ok=True)
    run = build_run(config, run_dir, resume=resume is not None)
    trainer = Trainer(run, resume=resume is not None)
    try:
        if run.main:
            run_dir.write_config(run.config)
            run_dir.point_latest()
        if resume is None and config.train.init_from is not None:
            trainer.validate_parent()
        code = trainer.fit()
        if code == 0:
            trainer.score_test()
        if code == 0 and run.main:
            draw_curves(run_dir, config.train.early_stopping_metric)
            if config.train.heatmaps:
                draw_showcase(run_dir, device=config.train.device)
        if code == 0 and run.main:
            say(f"model card: {write_model_card(run_dir)}")
        return run_dir.path, code
    finally:
        trainer.close()
