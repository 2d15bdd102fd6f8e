"""Building a run: everything the training loop needs before its first step, in order:
processes and device, seeds and logging, the prepared data (translator.encoded), the
tokenizer, guided-alignment targets, the model, the optimiser and the batches.

    run = build_run(config, RunDir.new("runs"))   # the caller's config is left as it was
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from translator.batching import Batch, Competence, TokenBatchSampler, alignment_targets
from translator.config import Config, ModelConfig, TrainConfig
from translator.data import Pair
from translator.device import native_bf16_flags, resolve_device, resolve_precision
from translator.distributed import from_main_process, init_distributed
from translator.dropout import dropout_state, seed_dropout, set_dropout_state
from translator.encoded import EncodedCorpus, prepare_data
from translator.errors import TranslatorError
from translator.finetune import check_coverage, copy_parent_tokenizer, start_from_parent
from translator.guided import guided_alignment_targets
from translator.links import Link
from translator.model import Transformer
from translator.recipe import Budget, batch_loss, build_optimizer
from translator.reporting import log, setup_logging
from translator.run_dir import RunDir
from translator.tokenizer import Tokenizer

# ---------------------------------------------------------------- encoded data


@dataclass
class EncodedSplit:
    pairs: Sequence[Pair]
    ids: EncodedCorpus  # the pairs' token ids, as arrays (translator.encoded)
    # per pair, (source piece, target piece) links for guided alignment (translator.guided)
    piece_links: Sequence[list[Link] | None] | None = None

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
    precision_reason: str  # why: forced by the config, the device's rule, or a timed probe
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


class RunTooLargeError(TranslatorError):
    """The model and a batch would not fit in the memory this machine has free."""


def parameter_count(model: ModelConfig) -> int:
    """The parameters `Transformer` will have (model.py): embeddings, layers, norms, bias."""
    d, ff = model.d_model, model.d_ff
    embeddings = model.source_vocab_size * d + (0 if model.share_embeddings
                                                 else model.target_vocab_size * d)
    attention, feed_forward, norm = 4 * (d * d + d), 2 * d * ff + ff + d, 2 * d
    encoder = model.layers * (attention + feed_forward + 2 * norm)
    decoder = model.num_decoder_layers * (2 * attention + feed_forward + 3 * norm)
    return embeddings + encoder + decoder + 2 * norm + model.target_vocab_size


def training_bytes(model: ModelConfig, batch_tokens: int) -> tuple[int, int]:
    """(parameters + gradients + AdamW's two moments, a batch's activations), in bytes of
    fp32: a rough estimate (activations: what backward keeps of each layer and the logits,
    within a factor of about two), made before anything is allocated."""
    state = 4 * 4 * parameter_count(model)
    layers = model.layers + 2 * model.num_decoder_layers  # cross-attention counts as a layer
    per_token = layers * (16 * model.d_model + 3 * model.d_ff) + 3 * model.target_vocab_size
    return state, 4 * batch_tokens * per_token


def free_memory(device: torch.device) -> int | None:
    """Bytes free on ``device``: the GPU's, or the machine's available memory; None when it
    cannot be told."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_fits(model: ModelConfig, batch_tokens: int, device: torch.device) -> None:
    """Refuse, in one sentence and before anything is allocated, a model and batch that need
    more memory than the device has free."""
    state, activations = training_bytes(model, batch_tokens)
    free = free_memory(device)
    if free is None or state + activations <= free:
        return
    gib = 2**30
    raise RunTooLargeError(
        f"this model and a batch need about {(state + activations) / gib:,.1f} GiB "
        f"(parameters, gradients and optimiser state {state / gib:,.1f} GiB, a batch of "
        f"{batch_tokens} tokens {activations / gib:,.1f} GiB), more than the "
        f"{free / gib:,.1f} GiB free on {device}; shrink model.d_model, model.d_ff, "
        "model.layers or train.batch_tokens")


def build_run(config: Config, run_dir: RunDir, resume: bool = False) -> Run:
    """Processes, device, seeds, logging, data, tokenizer, model, optimiser and batches for
    ``config``, in the run folder ``run_dir`` (whose tokenizer is reused when ``resume``). A
    new fine-tune (train.init_from) takes its parent's tokenizer and weights."""
    rank, world_size = init_distributed()
    cfg = config.train
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    seed_dropout(cfg.seed)
    if rank == 0:
        run_dir.checkpoints_dir.mkdir(parents=True, exist_ok=True)
    setup_logging(run_dir if rank == 0 else None)
    fine_tune = cfg.init_from is not None and not resume
    if fine_tune and rank == 0:
        copy_parent_tokenizer(config, run_dir.tokenizer_dir)
    # clean splits, tokenizer (trained on rank 0 of a new run) and token ids, from the cache
    prepared = prepare_data(config, run_dir.tokenizer_dir, resume or fine_tune, rank)
    log.info("data: %s", prepared.summary().replace("\n", "; "))
    tokenizer = prepared.tokenizer
    config = dataclasses.replace(config, model=resolved_model_config(config.model, tokenizer))
    train_data = EncodedSplit(prepared.train_pairs, prepared.train)
    dev_data = EncodedSplit(prepared.dev_pairs, prepared.dev)
    check_fits(config.model, cfg.batch_tokens, device)
    if cfg.alignment_weight > 0:
        config, train_data.piece_links = guided_alignment_targets(config, prepared, rank)
    model = Transformer(config.model).to(device)
    if fine_tune:  # the parent's weights; its digest goes into config.yaml
        check_coverage(prepared)
        digest = start_from_parent(config, model, tokenizer.fingerprint())
        config = dataclasses.replace(config, train=dataclasses.replace(config.train,
                                                                       init_sha256=digest))
    budget = Budget(cfg)
    optimizer, scheduler = build_optimizer(model, cfg, budget)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    competence = None
    if cfg.curriculum != "none" and cfg.curriculum_steps > 0:
        competence = Competence.of(train_data.ids.source_difficulty(cfg.curriculum),
                                   cfg.curriculum_steps * cfg.accumulate)
    sampler = TokenBatchSampler(train_data.lengths(), cfg.batch_tokens, cfg.seed, shuffle=True,
                                num_shards=world_size, shard_index=rank, competence=competence)
    run = Run(config, run_dir, rank, world_size, device, precision or "fp32",
              precision_reason(cfg.precision, device), prepared.splits, tokenizer, train_data,
              dev_data, model, optimizer, scheduler, scaler, sampler, budget)
    if precision is None:
        run.precision, run.precision_reason = from_main_process(probe_precision(run))
    if run.precision != cfg.precision:  # config.yaml keeps what auto chose: a resume goes on in it
        run.config = dataclasses.replace(run.config, train=dataclasses.replace(
            run.config.train, precision=run.precision))
    return run


def precision_reason(asked: str, device: torch.device) -> str:
    """Why a run computes in its precision, for its first line (a probe says its own)."""
    if asked not in ("auto", "probe"):
        return "set by train.precision"
    if device.type == "cuda":
        return f"{asked}: what this GPU supports"
    if device.type == "mps":
        return f"{asked}: fp32 on Apple's MPS (lower precisions untested there)"
    if asked == "probe":
        return "probe: this CPU has no native bf16 (avx512_bf16, amx_bf16 or Arm bf16)"
    return ("auto: fp32 on CPUs (the default run made fewer steps in bf16; "
            "train.precision=probe times both)")


PROBE_BATCHES = 3  # training batches timed in each precision, twice (fp32, bf16, fp32, bf16)
PROBE_MARGIN = 1.1  # bf16 must be this much faster: its rounding is not free


def probe_precision(run: Run) -> tuple[str, str]:
    """train.precision=probe on a CPU with native bf16: the faster of fp32 and bf16, timed on
    forward and backward passes of the first training batches (after one untimed pass each), the two
    alternating so that a busy machine slows both alike. The weights, the sampler and the
    random streams are left as they were, so the run that follows is the one it would be
    without the probe; its seconds count in the time budget."""
    started = time.perf_counter()
    sampler_state, rng, dropout = run.sampler.state_dict(), torch.get_rng_state(), dropout_state()
    batches = [run.train_data.batch(indices, run.tokenizer, run.device)
               for indices, _ in zip(run.sampler, range(PROBE_BATCHES + 1))]
    seconds = {"fp32": math.inf, "bf16": math.inf}
    run.model.train()
    for precision, timed in (("fp32", batches[:1]), ("bf16", batches[:1])) + (
            ("fp32", batches[1:]), ("bf16", batches[1:])) * 2:
        start = time.perf_counter()
        for batch in timed:
            batch_loss(run.model, batch, run.tokenizer, run.config.train, run.device,
                       precision).backward()
        if len(timed) > 1:
            seconds[precision] = min(seconds[precision], time.perf_counter() - start)
    run.model.zero_grad(set_to_none=True)
    run.sampler.load_state_dict(sampler_state)
    torch.set_rng_state(rng)
    set_dropout_state(dropout)
    run.budget.seconds += time.perf_counter() - started
    speedup = seconds["fp32"] / seconds["bf16"]
    chosen = "bf16" if speedup >= PROBE_MARGIN else "fp32"
    return chosen, (f"probe: bf16 timed {speedup:.2f}× fp32 on {len(batches) - 1} batches, "
                    f"CPU with {'/'.join(native_bf16_flags())}, probe "
                    f"{time.perf_counter() - started:.1f} s")


def new_run_dir(cfg: TrainConfig, rank: int) -> RunDir:
    """Rank 0 names (and checks) a new run folder; every process writes into that one."""
    run_dir = RunDir.new(cfg.output_dir, cfg.run_name, cfg.overwrite) if rank == 0 else None
    return from_main_process(run_dir)
