"""The training loop: data → tokenizer → model → steps → validation → checkpoints → scores.

One code path for CPU and GPU, one process or many (torchrun + DistributedDataParallel).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sacrebleu
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from translator.checkpoint import load_checkpoint, save_checkpoint
from translator.data import Pair, TokenBatchSampler, load_splits, make_batch
from translator.errors import TranslatorError
from translator.model import Transformer
from translator.plotting import draw_showcase_heatmaps
from translator.search import search_in_batches
from translator.tokenizer import Tokenizer

if TYPE_CHECKING:
    from translator.config import Config

log = logging.getLogger("translator")


@dataclass
class TrainConfig:
    output_dir: str = "runs"  # run folders are created under this folder
    run_name: str | None = None  # the run folder's name; None: the date and time
    overwrite: bool = False  # allow reusing an existing run folder (it is never done silently)
    seed: int = 1  # seeds parameters, dropout and batch order
    device: str = "auto"  # "auto" (CUDA if present, else CPU), "cpu", "cuda", "cuda:1", ...
    precision: str = "auto"  # "auto" (bf16 if supported, else fp16 on GPUs), fp32, bf16, fp16
    compile: bool = False  # torch.compile the model (slower start, faster steps on GPUs)
    threads: int = 0  # CPU threads for torch; 0 keeps torch's default
    max_steps: int = 3000  # optimiser steps
    max_minutes: float = 0.0  # stop (and save) after this many minutes; 0: no time limit
    batch_tokens: int = 4096  # padded source+target tokens per batch (per process)
    accumulate: int = 1  # batches whose gradients are summed into one optimiser step
    learning_rate: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 400  # linear warm-up, then decay ∝ 1/√step (Vaswani et al.)
    adam_betas: list[float] | None = None  # None: (0.9, 0.98), the paper's
    weight_decay: float = 0.0  # AdamW's decoupled weight decay
    label_smoothing: float = 0.1  # ε_ls of the paper
    clip_norm: float = 1.0  # clip the gradient norm to this; 0 turns clipping off
    log_every: int = 50  # steps between metric lines in metrics.jsonl
    eval_every: int = 500  # steps between validations (dev loss, BLEU, chrF)
    eval_sentences: int = 400  # dev sentences translated for BLEU/chrF (0: all)
    eval_samples: int = 3  # sample translations written to the log at each validation
    early_stopping_metric: str = "chrf"  # "chrf", "bleu" or "loss" (dev), picks best.pt
    patience: int = 0  # validations without improvement before stopping; 0: never stop early
    keep_best: int = 1  # keep this many best checkpoints (best.pt plus step-N.pt files)
    test_beam_size: int = 4  # beam size for the final test-split score (1: greedy)
    heatmaps: bool = True  # draw the showcase sentences' heatmaps into heatmaps/ at the end

    def __post_init__(self) -> None:
        if self.precision not in ("auto", "fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be auto, fp32, bf16 or fp16, not {self.precision!r}")
        if self.early_stopping_metric not in ("chrf", "bleu", "loss"):
            raise ValueError("early_stopping_metric must be chrf, bleu or loss")
        if self.max_steps < 1 or self.batch_tokens < 1 or self.accumulate < 1:
            raise ValueError("max_steps, batch_tokens and accumulate must be at least 1")


class TrainingError(TranslatorError):
    """Training cannot go on (a NaN loss, an unusable run folder, ...)."""


class Stopped(Exception):
    """Raised inside the loop when SIGINT/SIGTERM asked the run to stop."""


# ---------------------------------------------------------------- devices and precision


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def init_distributed() -> tuple[int, int]:
    """(rank, world size); starts the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def resolve_device(name: str) -> torch.device:
    """"auto" → CUDA if visible, else CPU; under torchrun "cuda" means this process's GPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and dist.is_initialized():
        name = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise TranslatorError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TranslatorError(f"device {name} asks for CUDA but no GPU is visible; use cpu or "
                              "auto")
    return device


def cpu_supports_bf16() -> bool:
    """True when the CPU has native bf16 matrix instructions (AVX512-BF16 or AMX). Without
    them bf16 matmuls are emulated and run about 5× slower than fp32 (measured here on an
    AVX-512 Xeon without AVX512-BF16: 21 against 99 GFLOP/s on one core)."""
    if "AMX" in torch.backends.cpu.get_cpu_capability():
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: don't guess, fp32 is never slow
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> str:
    """auto: bf16 where the hardware does it natively, else fp16 on GPUs, fp32 on CPUs."""
    if device.type == "cpu" and precision == "fp16":
        raise TrainingError("fp16 on a CPU is about 100× slower than fp32; use "
                            "train.precision=bf16 or fp32")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_supports_bf16() else "fp32"


def autocast(device: torch.device, precision: str):
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


# ---------------------------------------------------------------- the schedule and the loss


def inverse_sqrt_schedule(warmup_steps: int):
    """lr(step) = peak · min(step / warmup, √(warmup / step)): the paper's schedule with its
    peak written out (d_model^-½ · warmup^-½ in the paper)."""
    warmup = max(1, warmup_steps)

    def factor(step: int) -> float:
        step = max(1, step)
        return min(step / warmup, math.sqrt(warmup / step))

    return factor


def token_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float
               ) -> torch.Tensor:
    """Summed cross-entropy over non-pad target tokens (label-smoothed if asked)."""
    return F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum")


# ---------------------------------------------------------------- run folders


def resolve_run_dir(config: Config) -> Path:
    name = config.train.run_name or time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(config.train.output_dir) / name
    if run_dir.exists() and any(run_dir.iterdir()) and not config.train.overwrite:
        raise TrainingError(f"run folder {run_dir} already exists; choose another "
                            "train.run_name, resume it with --resume, or pass "
                            "train.overwrite=true")
    return run_dir


def point_latest(run_dir: Path) -> None:
    """Make <output_dir>/latest a link to the newest run (replaced atomically)."""
    link = run_dir.parent / "latest"
    temporary = run_dir.parent / f".latest.{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(run_dir.name)
    os.replace(temporary, link)


def setup_logging(run_dir: Path | None) -> None:
    log.setLevel(logging.INFO)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    if run_dir is not None:
        handler = logging.FileHandler(run_dir / "train.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)


def say(message: str) -> None:
    """A line for the person at the terminal (kept clear of the progress bar) and the log."""
    if is_main_process():
        tqdm.write(message, file=sys.stderr)  # stdout carries only the run folder's path
        log.info(message)


# ---------------------------------------------------------------- encoded data


@dataclass
class EncodedSplit:
    pairs: list[Pair]
    source_ids: list[list[int]]
    target_ids: list[list[int]]

    def lengths(self) -> list[tuple[int, int]]:
        return [(len(s) + 1, len(t) + 1) for s, t in zip(self.source_ids, self.target_ids)]

    def batch(self, indices: list[int], tokenizer: Tokenizer, device: torch.device):
        return make_batch([self.source_ids[i] for i in indices],
                          [self.target_ids[i] for i in indices],
                          tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id).to(device)


def encode_split(pairs: list[Pair], tokenizer: Tokenizer, max_tokens: int) -> EncodedSplit:
    """Token ids per side, cut to what the positional table can hold (EOS/BOS included)."""
    return EncodedSplit(
        pairs,
        [tokenizer.encode_source(p.source)[: max_tokens - 1] for p in pairs],
        [tokenizer.encode_target(p.target)[: max_tokens - 1] for p in pairs],
    )


# ---------------------------------------------------------------- the trainer


class Trainer:
    """Holds everything one run needs; ``run()`` trains, validates, saves and scores."""

    def __init__(self, config: Config, run_dir: Path, resume: bool = False) -> None:
        self.config = config
        self.run_dir = run_dir
        self.rank, self.world_size = init_distributed()
        self.main = self.rank == 0
        cfg = config.train
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        self.device = resolve_device(cfg.device)
        self.precision = resolve_precision(cfg.precision, self.device)
        self._seed(cfg.seed)
        if self.main:
            (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        setup_logging(run_dir if self.main else None)
        loaded = load_splits(config.data)
        self.splits = loaded.splits
        log.info("data: %s", loaded.summary().replace("\n", "; "))
        self.tokenizer = self._tokenizer(resume)
        max_tokens = config.model.max_positions
        self.train_data = encode_split(self.splits["train"], self.tokenizer, max_tokens)
        self.dev_data = encode_split(self.splits["dev"], self.tokenizer, max_tokens)
        config.model.source_vocab_size = self.tokenizer.source_vocab_size
        config.model.target_vocab_size = self.tokenizer.target_vocab_size
        config.model.pad_id = self.tokenizer.pad_id
        config.model.share_embeddings = config.model.share_embeddings and self.tokenizer.joint
        self.model = Transformer(config.model).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.learning_rate, betas=tuple(cfg.adam_betas or
            (0.9, 0.98)), eps=1e-9, weight_decay=cfg.weight_decay,
            fused=True)  # one kernel for all parameters: 3× faster steps on CPU
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, inverse_sqrt_schedule(cfg.warmup_steps))
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.sampler = TokenBatchSampler(self.train_data.lengths(), cfg.batch_tokens, cfg.seed,
                                         shuffle=True, num_shards=self.world_size,
                                         shard_index=self.rank)
        self.step = 0
        self.best: list[tuple[float, int]] = []  # (score, step), best first
        self.evaluations_without_improvement = 0
        self.stop_signal: int | None = None
        if resume:
            self._load_state(load_checkpoint(run_dir / "checkpoints" / "last.pt", self.device))
        self.train_model: nn.Module = self.model
        if cfg.compile:
            self.train_model = torch.compile(self.model)
        if self.world_size > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = nn.parallel.DistributedDataParallel(self.train_model,
                                                                   device_ids=device_ids)

    # -- set-up helpers

    def _seed(self, seed: int) -> None:
        random.seed(seed)
        torch.manual_seed(seed)

    def _tokenizer(self, resume: bool) -> Tokenizer:
        folder = self.run_dir / "tokenizer"
        if not resume and self.main:
            train = self.splits["train"]
            Tokenizer.train(self.config.tokenizer, [p.source for p in train],
                            [p.target for p in train], folder)
        if dist.is_initialized():
            dist.barrier()
        return Tokenizer.load(folder)

    # -- checkpoints

    def _state(self) -> dict[str, Any]:
        from translator.config import config_to_dict

        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "sampler": self.sampler.state_dict(),
            "step": self.step,
            "best": self.best,
            "evaluations_without_improvement": self.evaluations_without_improvement,
            "rng": {"python": random.getstate(), "torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "config": config_to_dict(self.config),
            "tokenizer": self.tokenizer.fingerprint(),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        if state.get("tokenizer") != self.tokenizer.fingerprint():
            raise TrainingError(f"the checkpoint in {self.run_dir} was trained with another "
                                "tokenizer than the one in its folder; resume the run it came "
                                "from")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.sampler.load_state_dict(state["sampler"])
        self.step = state["step"]
        self.best = [tuple(b) for b in state["best"]]
        self.evaluations_without_improvement = state["evaluations_without_improvement"]
        random.setstate(state["rng"]["python"])
        torch.set_rng_state(state["rng"]["torch"].cpu())
        if torch.cuda.is_available() and state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])

    def save(self, name: str) -> Path:
        path = self.run_dir / "checkpoints" / name
        if self.main:
            save_checkpoint(self._state(), path)
        return path

    # -- one optimiser step

    def _batches(self):
        """Batches forever, epoch after epoch; the sampler remembers where it is."""
        while True:
            for indices in self.sampler:
                yield self.train_data.batch(indices, self.tokenizer, self.device)

    def train_step(self, batches) -> tuple[float, int]:
        """Forward, backward (over ``accumulate`` batches) and update. Returns the smoothed
        loss per target token (averaged over batches and processes, as the gradient is) and
        the number of source+target tokens seen by all processes."""
        cfg = self.config.train
        self.train_model.train()
        self.optimizer.zero_grad(set_to_none=True)
        batch_losses, tokens = [], 0
        for micro_step in range(cfg.accumulate):
            batch = next(batches)
            last = micro_step == cfg.accumulate - 1
            sync = nullcontext() if last or self.world_size == 1 else self.train_model.no_sync()
            with sync:
                with autocast(self.device, self.precision):
                    logits = self.train_model(batch.source, batch.target_input)
                loss = token_loss(logits, batch.target_output, self.tokenizer.pad_id,
                                  cfg.label_smoothing) / batch.num_target_tokens
                self.scaler.scale(loss / cfg.accumulate).backward()
            batch_losses.append(loss.item())
            tokens += batch.num_target_tokens + int((batch.source != self.tokenizer.pad_id).sum())
        mean_loss = sum(batch_losses) / len(batch_losses)
        if self.world_size > 1:
            mean_loss = self._all_mean(mean_loss)
        if not math.isfinite(mean_loss):
            raise TrainingError(
                f"the loss became {mean_loss} at step {self.step + 1}; the last good "
                f"checkpoint is kept in {self.run_dir / 'checkpoints'}; lower "
                "train.learning_rate or raise train.warmup_steps, then --resume")
        self.scaler.unscale_(self.optimizer)
        if cfg.clip_norm > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.step += 1
        return mean_loss, tokens * self.world_size

    def _all_mean(self, value: float) -> float:
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.item() / self.world_size

    # -- validation

    @torch.no_grad()
    def dev_loss(self) -> float:
        self.model.eval()
        sampler = TokenBatchSampler(self.dev_data.lengths(), self.config.train.batch_tokens,
                                    seed=0, shuffle=False)
        total, tokens = 0.0, 0
        for indices in sampler:
            batch = self.dev_data.batch(indices, self.tokenizer, self.device)
            with autocast(self.device, self.precision):
                logits = self.model(batch.source, batch.target_input)
            total += token_loss(logits, batch.target_output, self.tokenizer.pad_id, 0.0).item()
            tokens += batch.num_target_tokens
        return total / max(1, tokens)

    def translate_ids(self, source_ids: list[list[int]], beam_size: int = 1) -> list[str]:
        """Translate already-encoded sentences (best hypothesis each), in input order."""
        self.model.eval()
        tok = self.tokenizer
        with autocast(self.device, self.precision):
            found = search_in_batches(self.model, source_ids, tok.pad_id, tok.bos_id,
                                      tok.eos_id, beam_size)
        return [tok.decode_target(nbest[0].tokens) for nbest in found]

    def validate(self) -> dict[str, Any]:
        cfg = self.config.train
        count = len(self.dev_data.pairs) if cfg.eval_sentences <= 0 else cfg.eval_sentences
        pairs = self.dev_data.pairs[:count]
        hypotheses = self.translate_ids(self.dev_data.source_ids[:count])
        references = [p.target for p in pairs]
        loss = self.dev_loss()
        record = {
            "kind": "validation", "step": self.step, "dev_loss": round(loss, 4),
            "dev_perplexity": round(math.exp(min(loss, 50.0)), 2),
            "dev_bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
            "dev_chrf": round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2),
            "dev_sentences": len(pairs),
        }
        for pair, hypothesis in list(zip(pairs, hypotheses))[: cfg.eval_samples]:
            log.info("  source:    %s\n  reference: %s\n  output:    %s", pair.source,
                     pair.target, hypothesis)
        return record

    def _improved(self, record: dict[str, Any]) -> bool:
        """Record the validation score; True if it enters the kept best checkpoints."""
        metric = self.config.train.early_stopping_metric
        score = record["dev_loss"] if metric == "loss" else record[f"dev_{metric}"]
        key = -score if metric == "loss" else score  # higher is better from here on
        improved = not self.best or key > self.best[0][0]
        self.evaluations_without_improvement = 0 if improved else (
            self.evaluations_without_improvement + 1)
        keep = self.config.train.keep_best
        entered = len(self.best) < keep or key > self.best[-1][0]
        if entered:
            self.best = sorted(self.best + [(key, self.step)], reverse=True)
            dropped = self.best[keep:]
            self.best = self.best[:keep]
            if self.main and keep > 1:
                self.save(f"step-{self.step}.pt")
                for _, step in dropped:
                    (self.run_dir / "checkpoints" / f"step-{step}.pt").unlink(missing_ok=True)
        return improved

    # -- the loop

    def _handle_signal(self, signum, frame) -> None:  # noqa: ARG002 (signal API)
        self.stop_signal = signum

    def write_metrics(self, record: dict[str, Any]) -> None:
        if self.main:
            with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as file:
                file.write(json.dumps(record) + "\n")

    def run(self) -> int:
        """Train to max_steps (or an early stop, a time limit, a signal). Returns the exit
        code: 0 when finished, 128 + signal number when stopped by a signal."""
        cfg = self.config.train
        previous = {s: signal.signal(s, self._handle_signal)
                    for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._loop(cfg)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _loop(self, cfg: TrainConfig) -> int:
        say(f"run folder: {self.run_dir}  |  {self.model.num_parameters():,} parameters  |  "
            f"{len(self.train_data.pairs):,} training pairs  |  device {self.device}, "
            f"{self.precision}, {self.world_size} process(es)")
        batches = self._batches()
        bar = tqdm(total=cfg.max_steps, initial=self.step, disable=not self.main,
                   desc="training", unit="step", dynamic_ncols=True)
        started, window_start, window_tokens = time.time(), time.time(), 0
        while self.step < cfg.max_steps:
            loss, tokens = self.train_step(batches)
            window_tokens += tokens
            bar.update(1)
            if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                speed = window_tokens / max(1e-9, time.time() - window_start)
                lr = self.scheduler.get_last_lr()[0]
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{speed:,.0f}")
                self.write_metrics({"kind": "train", "step": self.step, "loss": round(loss, 4),
                                    "lr": lr, "tokens_per_second": round(speed),
                                    "epoch": self.sampler.state_dict().get("epoch", 0)})
                window_start, window_tokens = time.time(), 0
            out_of_time = self._agree(
                cfg.max_minutes > 0 and time.time() - started > cfg.max_minutes * 60)
            if self.step % cfg.eval_every == 0 or self.step == cfg.max_steps or out_of_time:
                if self._validate_and_save():
                    say(f"early stop: no better dev {cfg.early_stopping_metric} in "
                        f"{cfg.patience} validations")
                    break
            if out_of_time:
                say(f"time limit of {cfg.max_minutes:g} minutes reached at step {self.step}")
                break
            if self._agree(self.stop_signal is not None):
                self.save("last.pt")
                name = signal.Signals(self.stop_signal).name
                say(f"stopped by {name} at step {self.step}; checkpoint saved to "
                    f"{self.run_dir / 'checkpoints' / 'last.pt'}; continue with: "
                    f"python scripts/train.py --resume {self.run_dir}")
                bar.close()
                return 128 + self.stop_signal
        bar.close()
        return 0

    def _agree(self, flag: bool) -> bool:
        """All processes stop together if any of them wants to."""
        if self.world_size == 1:
            return flag
        tensor = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(tensor)
        return tensor.item() > 0

    def _validate_and_save(self) -> bool:
        """Validate on rank 0, save last/best; True when early stopping says stop."""
        stop = False
        if self.main:
            record = self.validate()
            improved = self._improved(record)
            self.write_metrics(record)
            say(f"step {self.step}: dev loss {record['dev_loss']:.3f}  ppl "
                f"{record['dev_perplexity']:.1f}  BLEU {record['dev_bleu']:.1f}  chrF "
                f"{record['dev_chrf']:.1f}" + ("  (best)" if improved else ""))
            if improved:
                self.save("best.pt")
            self.save("last.pt")
            patience = self.config.train.patience
            stop = patience > 0 and self.evaluations_without_improvement >= patience
        return self._agree(stop)

    # -- the end of a run

    def finish(self) -> dict[str, Any]:
        """Score the test split with the best checkpoint and write test_scores.json."""
        if not self.main:
            return {}
        best = self.run_dir / "checkpoints" / "best.pt"
        if best.exists():
            self.model.load_state_dict(load_checkpoint(best, self.device)["model"])
        test_pairs = self.splits["test"]
        if not test_pairs:
            return {}
        test = encode_split(test_pairs, self.tokenizer, self.config.model.max_positions)
        beam = self.config.train.test_beam_size
        hypotheses = self.translate_ids(test.source_ids, beam_size=beam)
        references = [[p.target for p in test_pairs]]
        bleu = sacrebleu.metrics.BLEU()
        chrf = sacrebleu.metrics.CHRF()
        scores = {
            "split": "test", "sentences": len(test_pairs), "beam_size": beam,
            "bleu": round(bleu.corpus_score(hypotheses, references).score, 2),
            "chrf": round(chrf.corpus_score(hypotheses, references).score, 2),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
        }
        (self.run_dir / "test_hypotheses.txt").write_text("\n".join(hypotheses) + "\n",
                                                           encoding="utf-8")
        (self.run_dir / "test_scores.json").write_text(json.dumps(scores, indent=2) + "\n")
        self.write_metrics({"kind": "test", "step": self.step, **scores})
        say(f"test split ({len(test_pairs)} sentences, beam {beam}): BLEU {scores['bleu']:.1f}"
            f"  chrF {scores['chrf']:.1f}")
        return scores

    def draw_showcase(self) -> None:
        """Heatmaps of the seeds' showcase sentences, as the trained model translates them."""
        if not self.main:
            return
        self.model.eval()
        paths = draw_showcase_heatmaps(self.model, self.tokenizer, self.run_dir / "heatmaps",
                                       self.config.data.direction, self.device,
                                       beam_size=self.config.train.test_beam_size)
        say(f"showcase heatmaps: {len(paths)} files in {self.run_dir / 'heatmaps'}")

    def close(self) -> None:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def train(config: Config, resume: Path | None = None) -> tuple[Path, int]:
    """Train a model as ``config`` says; returns the run folder and the exit code."""
    from translator.config import save_config

    rank, _ = init_distributed()
    if resume is not None:
        run_dir = Path(resume)
    else:
        run_dir = resolve_run_dir(config) if rank == 0 else None
        if dist.is_initialized():  # every process writes into rank 0's folder
            shared = [run_dir]
            dist.broadcast_object_list(shared, src=0)
            run_dir = shared[0]
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(config, run_dir, resume=resume is not None)
    try:
        if trainer.main:
            save_config(config, run_dir / "config.yaml")
            point_latest(run_dir)
        code = trainer.run()
        if code == 0:
            trainer.finish()
            if config.train.heatmaps:
                trainer.draw_showcase()
        return run_dir, code
    finally:
        trainer.close()
