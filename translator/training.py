"""Training, in two parts: build a run (data, tokenizer, model, optimiser), then the loop that
steps, validates, keeps the best checkpoints and stops.

    run = build_run(config, RunDir.new("runs"))   # the caller's config is left as it was
    trainer = Trainer(run)
    if trainer.fit() == 0:                        # 0: finished; 128 + N: stopped by signal N
        trainer.score_test()                      # test_scores.json with the best checkpoint

`train` does all of it (and writes config.yaml and runs/latest), as the command line does; the
command line then draws the heatmaps, since the trainer never plots. One code path for CPU and
GPU, one process or many (torchrun + DistributedDataParallel). The loss of a batch
(`batch_loss`) and the learning-rate schedule (`learning_rate_schedule`) are small functions of
their own, the places to change them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from translator.batching import Batch, TokenBatchSampler, alignment_targets
from translator.config import Config, ModelConfig, TrainConfig, config_to_dict
from translator.data import Pair, WordLinks, load_train_links, split_tag
from translator.device import autocast, resolve_device, resolve_precision
from translator.encoded import EncodedCorpus, prepare_data
from translator.errors import TranslatorError
from translator.links import Link, LinksError, piece_links, swap
from translator.metrics import corpus_scores
from translator.model import Transformer
from translator.resume import check_resume
from translator.run_dir import RunDir
from translator.tokenizer import Tokenizer, piece_words
from translator.translate import repetition_bans, translate

log = logging.getLogger("translator")

DECODE_BATCH_SIZE = 64  # sentences per search batch for the dev and test scores
# A run of data.direction=both is scored both ways: hi→en under the plain names (dev_chrf,
# dev_bleu, dev_loss, test chrf and bleu), so that it compares directly with a hi-en run, and
# en→hi under the same names ending in this suffix (dev_chrf_en_hi, chrf_en_hi, ...).
EN_HI = "_en_hi"


class TrainingError(TranslatorError):
    """Training cannot go on (a NaN loss, an unusable run folder, ...)."""


# ---------------------------------------------------------------- processes


def init_distributed() -> tuple[int, int]:
    """(rank, world size); starts the process group when launched by torchrun, also for one
    process (torchrun --nproc_per_node=1 runs the DDP code path)."""
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        if torch.cuda.is_available():  # first: NCCL's collectives run on the current GPU
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """Rank 0, or the only process (torchrun's RANK still tells after the group is closed)."""
    rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))
    return rank == 0


def setup_logging(run_dir: RunDir | None) -> None:
    """The "translator" logger writes to the run's train.log (on the main process only)."""
    log.setLevel(logging.INFO)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    if run_dir is not None:
        handler = logging.FileHandler(run_dir.log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)


def say(message: str) -> None:
    """A line for the person at the terminal (kept clear of the progress bar) and the log."""
    if is_main_process():
        tqdm.write(message, file=sys.stderr)  # stdout carries only the run folder's path
        log.info(message)


# ---------------------------------------------------------------- the schedule and the loss


def inverse_sqrt_schedule(warmup_steps: int) -> Callable[[int], float]:
    """lr(step) = peak · min(step / warmup, √(warmup / step)): the paper's schedule with its
    peak written out (d_model^-½ · warmup^-½ in the paper)."""
    warmup = max(1, warmup_steps)

    def factor(step: int) -> float:
        step = max(1, step)
        return min(step / warmup, math.sqrt(warmup / step))

    return factor


class Budget:
    """How much of the run's budget is spent: steps of ``max_steps`` and, with a time limit,
    seconds of ``max_minutes`` (the loop adds its wall time, validations included, and a
    resumed run goes on counting from its checkpoint)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.max_steps = cfg.max_steps
        self.seconds_allowed = cfg.max_minutes * 60
        self.seconds = 0.0

    def progress(self, step: int) -> float:
        """The share spent, 0 to 1: of the steps, or of the time if that runs out first."""
        spent = step / self.max_steps
        if self.seconds_allowed > 0:
            spent = max(spent, self.seconds / self.seconds_allowed)
        return min(1.0, spent)

    @property
    def out_of_time(self) -> bool:
        return self.seconds_allowed > 0 and self.seconds >= self.seconds_allowed


def linear_schedule(warmup_steps: int, decay_start: float, budget: Budget
                    ) -> Callable[[int], float]:
    """Warm up linearly, hold the peak until ``decay_start`` of the budget is spent, then fall
    linearly to zero at its end ("Budgeted Training", Li et al. 2020): the last step lands
    on a learning rate of zero whether the budget is steps or minutes."""
    warmup = max(1, warmup_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return max(1, step) / warmup
        start = max(decay_start, warmup / budget.max_steps)
        spent = budget.progress(step)
        return 1.0 if spent <= start else max(0.0, (1.0 - spent) / (1.0 - start))

    return factor


def learning_rate_schedule(cfg: TrainConfig, budget: Budget) -> Callable[[int], float]:
    """The factor on the peak learning rate at each step, as the config asks."""
    if cfg.schedule == "linear":
        return linear_schedule(cfg.warmup_steps, cfg.decay_start, budget)
    return inverse_sqrt_schedule(cfg.warmup_steps)


def token_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float
               ) -> torch.Tensor:
    """Summed cross-entropy over non-pad target tokens (label-smoothed if asked)."""
    return F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum")


def alignment_loss(attention: torch.Tensor, targets: torch.Tensor, head: int = -1
                   ) -> torch.Tensor:
    """Summed KL(targets ‖ attention) over the target positions that have links: zero when
    the attention [B, heads, T, S] (one head, or the mean of heads for ``head`` -1) equals
    the link distribution ``targets`` [B, T, S], positive otherwise. Its gradient is that of
    the cross-entropy of Garg et al. (2019)."""
    weights = attention.float().mean(1) if head < 0 else attention[:, head].float()
    present = targets > 0
    return (targets[present] * (targets[present].log()
                                - weights[present].clamp_min(1e-9).log())).sum()


def drop_words(source: torch.Tensor, rate: float, unk_id: int, eos_id: int) -> torch.Tensor:
    """Source word dropout (Sennrich & Zhang 2019), per piece: each real piece (not padding,
    BOS or EOS; ids above EOS) becomes <unk> with probability ``rate``."""
    if rate <= 0:
        return source
    dropped = (torch.rand(source.shape, device=source.device) < rate) & (source > eos_id)
    return source.masked_fill(dropped, unk_id)


def batch_loss(model: nn.Module, batch: Batch, tokenizer: Tokenizer, cfg: TrainConfig,
               device: torch.device, precision: str) -> torch.Tensor:
    """The loss one batch contributes to a step, per target token: label-smoothed
    cross-entropy (with source word dropout if asked) plus λ × the guided-alignment loss
    when the batch carries alignment targets; the forward pass in the run's precision."""
    source = drop_words(batch.source, cfg.word_dropout, tokenizer.unk_id, tokenizer.eos_id)
    guided = cfg.alignment_weight > 0 and batch.alignment is not None
    with autocast(device, precision):
        out = model(source, batch.target_input,
                    attention_layer=cfg.alignment_layer if guided else None,
                    full_context_alignment=cfg.alignment_full_context)
    logits, attention = out if guided else (out, None)
    loss = token_loss(logits, batch.target_output, tokenizer.pad_id, cfg.label_smoothing)
    if guided:
        loss = loss + cfg.alignment_weight * alignment_loss(attention, batch.alignment,
                                                            cfg.alignment_head)
    return loss / batch.num_target_tokens


def average_weights(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of several state dicts of one model (checkpoint averaging)."""
    return {key: (sum(state[key].double() for state in states) / len(states)).to(
        states[0][key].dtype) for key in states[0]}


# ---------------------------------------------------------------- encoded data


@dataclass
class EncodedSplit:
    pairs: Sequence[Pair]
    ids: EncodedCorpus  # the pairs' token ids, as arrays (translator.encoded)
    # per pair, (source piece, target piece) links for guided alignment, or None
    piece_links: list[list[Link] | None] | None = None

    @property
    def source_ids(self) -> Sequence[list[int]]:
        return self.ids.source_ids

    @property
    def target_ids(self) -> Sequence[list[int]]:
        return self.ids.target_ids

    def lengths(self) -> np.ndarray:
        return self.ids.lengths()

    def batch(self, indices: list[int], tokenizer: Tokenizer, device: torch.device) -> Batch:
        batch = self.ids.batch(indices, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
        if self.piece_links is not None:
            batch.alignment = alignment_targets([self.piece_links[i] for i in indices],
                                                batch.target_output.size(1), batch.source.size(1))
        return batch.to(device)


def pair_piece_links(split: EncodedSplit, tokenizer: Tokenizer, links: WordLinks,
                     direction: str) -> list[list[Link] | None]:
    """Each pair's word links (Hindi-first, looked up by its text) as (source piece, target
    piece) links of its encoded ids; None for pairs without links or whose links do not fit
    the pieces (a sentence cut at max_positions). For direction "both" a source's tag is its
    first piece, so its words' pieces stand one further on, and an en→hi pair takes the
    swapped links of its hi→en twin."""
    found: list[list[Link] | None] = []
    for pair, source_ids, target_ids in zip(split.pairs, split.source_ids, split.target_ids):
        language, source = split_tag(pair.source) if direction == "both" else (
            None, pair.source)
        hindi_first = language == "en" if direction == "both" else direction == "hi-en"
        key = (source, pair.target) if hindi_first else (pair.target, source)
        word_links = links.get(key)
        if not word_links:
            found.append(None)
            continue
        tag = int(language is not None)  # the tag's piece, before the words' pieces
        _, source_word = piece_words(tokenizer.source_pieces(source_ids[tag:]))
        _, target_word = piece_words(tokenizer.target_pieces(target_ids))
        try:
            pieces = piece_links(word_links if hindi_first else swap(word_links),
                                 source_word, target_word)
        except LinksError:
            found.append(None)
            continue
        found.append([(source_piece + tag, target_piece) for source_piece, target_piece
                      in pieces])
    return found


def scored_directions(direction: str) -> list[tuple[str, str | None]]:
    """(metric-name suffix, target language to ask for) of each direction a run is scored in:
    one, unnamed, for a run of one direction; hi→en ("") then en→hi (`EN_HI`) for "both"."""
    return [("", "en"), (EN_HI, "hi")] if direction == "both" else [("", None)]


def direction_rows(pairs: Sequence[Pair], target_language: str | None) -> list[int]:
    """Indices of the pairs whose source is tagged for ``target_language`` (None: all)."""
    if target_language is None:
        return list(range(len(pairs)))
    return [i for i, pair in enumerate(pairs) if split_tag(pair.source)[0] == target_language]


# ---------------------------------------------------------------- building a run


@dataclass
class Run:
    """Everything the loop needs, built before its first step."""

    config: Config  # the resolved config: the model section completed from the tokenizer
    run_dir: RunDir
    rank: int
    world_size: int
    device: torch.device
    precision: str  # fp32, bf16 or fp16, as resolved for the device
    splits: dict[str, Sequence[Pair]]  # the clean pairs (train read from the cache if asked)
    tokenizer: Tokenizer
    train_data: EncodedSplit
    dev_data: EncodedSplit
    model: Transformer
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    sampler: TokenBatchSampler
    budget: Budget  # steps and seconds spent; the linear schedule reads it

    @property
    def main(self) -> bool:
        return self.rank == 0


def resolved_model_config(model: ModelConfig, tokenizer: Tokenizer) -> ModelConfig:
    """A copy of ``model`` with what the tokenizer decides: vocabulary sizes, the pad id and
    whether the embeddings can be shared (only with one joint vocabulary)."""
    return dataclasses.replace(model, source_vocab_size=tokenizer.source_vocab_size,
                               target_vocab_size=tokenizer.target_vocab_size,
                               pad_id=tokenizer.pad_id,
                               share_embeddings=model.share_embeddings and tokenizer.joint)


def build_optimizer(model: nn.Module, cfg: TrainConfig, budget: Budget
                    ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (the paper's betas and ε unless set) and its learning-rate schedule."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.learning_rate, betas=tuple(cfg.adam_betas or (0.9, 0.98)),
        eps=1e-9, weight_decay=cfg.weight_decay,
        fused=True)  # one kernel for all parameters: 3× faster steps on CPU
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                        learning_rate_schedule(cfg, budget))


def build_run(config: Config, run_dir: RunDir, resume: bool = False) -> Run:
    """Processes, device, seeds, logging, data, tokenizer, model, optimiser and batches for
    ``config``, in the run folder ``run_dir`` (whose tokenizer is reused when ``resume``)."""
    rank, world_size = init_distributed()
    cfg = config.train
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if rank == 0:
        run_dir.checkpoints_dir.mkdir(parents=True, exist_ok=True)
    setup_logging(run_dir if rank == 0 else None)
    # clean splits, tokenizer (trained on rank 0 of a new run) and token ids, from the cache
    prepared = prepare_data(config, run_dir.tokenizer_dir, resume, rank)
    log.info("data: %s", prepared.summary().replace("\n", "; "))
    tokenizer = prepared.tokenizer
    config = dataclasses.replace(config, model=resolved_model_config(config.model, tokenizer))
    train_data = EncodedSplit(prepared.train_pairs, prepared.train)
    dev_data = EncodedSplit(prepared.dev_pairs, prepared.dev)
    if cfg.alignment_weight > 0:
        train_data.piece_links = pair_piece_links(train_data, tokenizer,
                                                  load_train_links(config.data),
                                                  config.data.direction)
        linked = sum(links is not None for links in train_data.piece_links)
        log.info("guided alignment: word links for %d of %d training pairs", linked,
                 len(train_data.pairs))
    model = Transformer(config.model).to(device)
    budget = Budget(cfg)
    optimizer, scheduler = build_optimizer(model, cfg, budget)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    sampler = TokenBatchSampler(train_data.lengths(), cfg.batch_tokens, cfg.seed, shuffle=True,
                                num_shards=world_size, shard_index=rank)
    return Run(config, run_dir, rank, world_size, device, precision, prepared.splits, tokenizer,
               train_data, dev_data, model, optimizer, scheduler, scaler, sampler, budget)


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
        self.bans = repetition_bans(run.tokenizer, self.cfg)  # what searches may not repeat
        if resume:
            self.load_state(run.run_dir.load_checkpoint("last", run.device))
        self.train_model: nn.Module = run.model
        if self.cfg.compile:
            self.train_model = torch.compile(run.model)
        if dist.is_initialized():  # under torchrun, one process too
            device_ids = [run.device.index] if run.device.type == "cuda" else None
            self.train_model = nn.parallel.DistributedDataParallel(self.train_model,
                                                                   device_ids=device_ids)

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
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "config": config_to_dict(run.config),
            "tokenizer": run.tokenizer.fingerprint(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        run = self.run
        if state.get("tokenizer") != run.tokenizer.fingerprint():
            raise TrainingError(f"the checkpoint in {run.run_dir} was trained with another "
                                "tokenizer than the one in its folder; resume the run it came "
                                "from")
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
        if torch.cuda.is_available() and state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all([s.cpu() for s in state["rng"]["cuda"]])

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
        mean_loss = self.mean_over_processes(sum(batch_losses) / len(batch_losses))
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

    def mean_over_processes(self, value: float) -> float:
        if self.run.world_size == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.run.device)
        dist.all_reduce(tensor)
        return tensor.item() / self.run.world_size

    def any_process(self, flag: bool) -> bool:
        """All processes stop together if any of them wants to."""
        if self.run.world_size == 1:
            return flag
        tensor = torch.tensor([1.0 if flag else 0.0], device=self.run.device)
        dist.all_reduce(tensor)
        return tensor.item() > 0

    # -- validation

    @torch.no_grad()
    def dev_loss(self, rows: Sequence[int] | None = None) -> float:
        """Cross-entropy per target token on the dev split, or on its pairs at ``rows`` (no
        label smoothing)."""
        run = self.run
        run.model.eval()
        lengths = run.dev_data.lengths()
        rows = np.arange(len(lengths)) if rows is None else np.asarray(rows, dtype=np.int64)
        sampler = TokenBatchSampler(lengths[rows], self.cfg.batch_tokens, seed=0,
                                    shuffle=False)
        total, tokens = 0.0, 0
        for indices in sampler:
            batch = run.dev_data.batch(rows[indices].tolist(), run.tokenizer, run.device)
            with autocast(run.device, run.precision):
                logits = run.model(batch.source, batch.target_input)
            total += token_loss(logits, batch.target_output, run.tokenizer.pad_id, 0.0).item()
            tokens += batch.num_target_tokens
        return total / max(1, tokens)

    def translate_texts(self, texts: list[str], beam_size: int = 1,
                        target_language: str | None = None) -> list[str]:
        """The model's translations of ``texts`` (the one decoding path, in the run's
        precision), in order; ``target_language`` for a model of both directions."""
        run = self.run
        with autocast(run.device, run.precision):
            results = translate(run.model, run.tokenizer, texts, beam_size=beam_size,
                                batch_size=DECODE_BATCH_SIZE, need_attention=False,
                                target_language=target_language, bans=self.bans,
                                length_penalty=self.cfg.length_penalty)
        return [result.text for result in results]

    def translate_pairs(self, pairs: Sequence[Pair], target_language: str | None,
                        beam_size: int = 1) -> list[str]:
        """The translations of the pairs' sources (without their tags: the target language
        is asked for by name)."""
        sources = [split_tag(p.source)[1] if target_language else p.source for p in pairs]
        return self.translate_texts(sources, beam_size, target_language)

    def validate(self) -> dict[str, Any]:
        """Dev loss, perplexity, BLEU and chrF (greedy, on the first eval_sentences); a few
        sample translations go to the log. A run of both directions is validated in both,
        on the first eval_sentences of each (so validating costs twice a hi-en run's, and its
        hi→en numbers are those a hi-en run computes on the same sentences)."""
        cfg, dev = self.cfg, self.run.dev_data
        record: dict[str, Any] = {"kind": "validation", "step": self.step}
        for suffix, language in scored_directions(self.run.config.data.direction):
            rows = direction_rows(dev.pairs, language)
            count = len(rows) if cfg.eval_sentences <= 0 else cfg.eval_sentences
            pairs = [dev.pairs[i] for i in rows[:count]]
            hypotheses = self.translate_pairs(pairs, language)
            scores = corpus_scores(hypotheses, [p.target for p in pairs],
                                   metrics=("bleu", "chrf"))
            loss = self.dev_loss(rows)
            record.update({
                f"dev_loss{suffix}": round(loss, 4),
                f"dev_perplexity{suffix}": round(math.exp(min(loss, 50.0)), 2),
                f"dev_bleu{suffix}": round(scores["bleu"], 2),
                f"dev_chrf{suffix}": round(scores["chrf"], 2),
                f"dev_sentences{suffix}": len(pairs),
            })
            for pair, hypothesis in list(zip(pairs, hypotheses))[: cfg.eval_samples]:
                log.info("  source:    %s\n  reference: %s\n  output:    %s", pair.source,
                         pair.target, hypothesis)
        return record

    @staticmethod
    def en_hi_scores(record: dict[str, Any], prefix: str = "dev_") -> str:
        """"  en→hi BLEU 3.1  chrF 20.4" for a record of a run of both directions, else ""."""
        if f"{prefix}chrf{EN_HI}" not in record:
            return ""
        return (f"  en→hi BLEU {record[f'{prefix}bleu{EN_HI}']:.1f}  chrF "
                f"{record[f'{prefix}chrf{EN_HI}']:.1f}")

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
            self.save("last")
        elif self.run.main:
            record = self.validate()
            improved = self.count_improvement(record)
            self.keep_best_checkpoints(record)
            self.write_metrics(record)
            say(f"step {self.step}: dev loss {record['dev_loss']:.3f}  ppl "
                f"{record['dev_perplexity']:.1f}  BLEU {record['dev_bleu']:.1f}  chrF "
                f"{record['dev_chrf']:.1f}" + self.en_hi_scores(record)
                + ("  (best)" if improved else ""))
            self.save("last", also=("best",) if improved else ())  # best.pt: a link, no copy
            self.remember_weights()
            patience = self.cfg.patience
            stop = patience > 0 and self.evaluations_without_improvement >= patience
        return self.any_process(stop)

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
            f"{run.precision}, {run.world_size} process(es)")
        batches = self.batches()
        bar = self.progress_bar()
        window_start, window_tokens = time.time(), 0
        while self.step < cfg.max_steps:
            step_start = time.time()
            loss, tokens = self.train_step(batches)
            window_tokens += tokens
            if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                self.log_progress(bar, loss, window_tokens / max(1e-9, time.time() - window_start))
                window_start, window_tokens = time.time(), 0
            out_of_time = self.any_process(run.budget.out_of_time)
            if self.step % cfg.eval_every == 0 or self.step == cfg.max_steps or out_of_time:
                if self.validate_and_save():
                    say(f"early stop: no better dev {cfg.early_stopping_metric} in "
                        f"{cfg.patience} validations")
                    break
            if out_of_time:
                say(f"time limit of {cfg.max_minutes:g} minutes reached at step {self.step}")
                break
            if self.any_process(self.stop_signal is not None):
                code = self.stop_by_signal()
                bar.close()
                return code
            self.advance(bar, time.time() - step_start)
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
        self.write_metrics({"kind": "train", "step": self.step, "loss": round(loss, 4), "lr": lr,
                            "tokens_per_second": round(speed),
                            "epoch": self.run.sampler.state_dict().get("epoch", 0)})

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
        record = {**self.validate(), "kind": "averaged", "averaged": len(self.snapshots)}
        improved = self.score_key(record) > self.best[0][0]
        self.write_metrics(record)
        say(f"average of the last {len(self.snapshots)} validations: dev BLEU "
            f"{record['dev_bleu']:.1f}  chrF {record['dev_chrf']:.1f}"
            + self.en_hi_scores(record) + ("  (best)" if improved else ""))
        self.save("averaged")
        if improved:
            self.best.insert(0, (self.score_key(record), self.step))
            self.save("best")
        model.load_state_dict(last)

    def stop_by_signal(self) -> int:
        """Save last.pt and say how to resume; the exit code is 128 + the signal number."""
        path = self.save("last")
        name = signal.Signals(self.stop_signal).name
        say(f"stopped by {name} at step {self.step}; checkpoint saved to {path}; continue with: "
            f"python scripts/train.py --resume {self.run.run_dir}")
        return 128 + self.stop_signal

    # -- the end of a run

    def score_test(self) -> dict[str, Any]:
        """Score the test split with the best checkpoint; write test_scores.json and
        test_hypotheses.txt (a run of both directions: hi→en there and under the plain keys,
        en→hi in test_hypotheses_en_hi.txt and under keys ending in _en_hi)."""
        run = self.run
        if not run.main:
            return {}
        best = run.run_dir.checkpoint("best")
        if best.exists():
            run.model.load_state_dict(run.run_dir.load_checkpoint("best", run.device)["model"])
        test_pairs = run.splits["test"]
        if not test_pairs:
            return {}
        beam = self.cfg.test_beam_size
        scores: dict[str, Any] = {"split": "test"}
        for suffix, language in scored_directions(run.config.data.direction):
            pairs = [test_pairs[i] for i in direction_rows(test_pairs, language)]
            hypotheses = self.translate_pairs(pairs, language, beam_size=beam)
            found = corpus_scores(hypotheses, [p.target for p in pairs],
                                  metrics=("bleu", "chrf"))
            scores.update({f"sentences{suffix}": len(pairs), "beam_size": beam,
                           f"bleu{suffix}": round(found["bleu"], 2),
                           f"chrf{suffix}": round(found["chrf"], 2),
                           f"bleu_signature{suffix}": found["bleu_signature"],
                           f"chrf_signature{suffix}": found["chrf_signature"]})
            path = run.run_dir.test_hypotheses_en_hi_file if suffix else (
                run.run_dir.test_hypotheses_file)
            path.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
        run.run_dir.test_scores_file.write_text(json.dumps(scores, indent=2) + "\n")
        self.write_metrics({"kind": "test", "step": self.step, **scores})
        say(f"test split ({scores['sentences']} sentences, beam {beam}): BLEU "
            f"{scores['bleu']:.1f}  chrF {scores['chrf']:.1f}" + self.en_hi_scores(scores, ""))
        return scores

    def close(self) -> None:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def new_run_dir(cfg: TrainConfig, rank: int) -> RunDir:
    """Rank 0 names (and checks) a new run folder; every process writes into that one."""
    run_dir = RunDir.new(cfg.output_dir, cfg.run_name, cfg.overwrite) if rank == 0 else None
    if dist.is_initialized():
        shared = [run_dir]
        dist.broadcast_object_list(shared, src=0)
        run_dir = shared[0]
    return run_dir


def train(config: Config, resume: str | Path | None = None) -> tuple[Path, int]:
    """Train a model as ``config`` says (or continue the run folder ``resume``), score the
    test split; returns the run folder and the exit code. ``config`` is not changed."""
    rank, _ = init_distributed()
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
        code = trainer.fit()
        if code == 0:
            trainer.score_test()
        return run_dir.path, code
    finally:
        trainer.close()
