"""Training speed: our Transformer against torch.nn.Transformer of the same size.

    python bench/train_speed.py                      # default model, fp32 and bf16
    python bench/train_speed.py --rounds 4 --steps 6 --precisions fp32   # longer, fp32 only

Both systems get the same embeddings (token × √d + sinusoidal positions), the same tied
output layer, the same label-smoothed loss, AdamW and gradient clipping, and train on the
same token batches of the embedded corpus (SentencePiece-encoded train pairs, batched by
translator.data.TokenBatchSampler as training does). Only the layers between embeddings and
output differ: ours (translator/model.py) or torch.nn.Transformer (pre-norm, batch-first).

Timing: warm-up steps are not timed; then `rounds` rounds of `steps` steps each, the two
systems alternating (ABBA order), so that a busy machine slows both alike. tokens/s counts
non-pad source + target tokens, as metrics.jsonl does.

Model FLOPs (matmuls only; softmax, norms, element-wise ops and the optimiser are left out):
per batch of B sentences, S source and T target positions (padded shapes: the work done),
d = d_model, f = d_ff, V = target vocabulary,
    encoder layer:  B·(8·S·d² + 4·S²·d + 4·S·d·f)
    decoder layer:  B·(8·T·d² + 4·T²·d  +  4·T·d² + 4·S·d² + 4·T·S·d  +  4·T·d·f)
                          self-attention    cross-attention               feed-forward
    output layer:   B·2·T·d·V
(2 FLOPs per multiply-add; Q·Kᵀ and weights·V are n·m·d multiply-adds each over all heads),
times 3 for forward + backward (the backward does two matmuls per forward matmul). The
formula is checked against torch.utils.flop_counter on one step of our model. The fraction of
peak divides achieved model FLOP/s by the best rate of a large torch.matmul measured in the
same run, in the same precision.
"""

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from translator.batching import Batch, TokenBatchSampler, make_batch
from translator.config import Config, load_config
from translator.data import load_splits
from translator.model import Embeddings, ModelConfig, Transformer
from translator.recipe import token_loss
from translator.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "default.yaml"))
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per system")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"],
                        choices=["fp32", "bf16"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. model.d_model=512")
    return parser.parse_args()


# ---------------------------------------------------------------- the data


def corpus_batches(config: Config, count: int) -> tuple[list[Batch], Tokenizer]:
    """The first `count` training batches, as the trainer would build them."""
    train = load_splits(config.data).splits["train"]
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = Tokenizer.train(config.tokenizer, [p.source for p in train],
                                    [p.target for p in train], folder)
    limit = config.model.max_positions - 1
    sources = [tokenizer.encode_source(p.source)[:limit] for p in train]
    targets = [tokenizer.encode_target(p.target)[:limit] for p in train]
    lengths = [(len(s) + 1, len(t) + 1) for s, t in zip(sources, targets)]
    sampler = TokenBatchSampler(lengths, config.train.batch_tokens, config.train.seed)
    batches = []
    for indices in sampler.epoch_batches(0)[:count]:
        batches.append(make_batch([sources[i] for i in indices], [targets[i] for i in indices],
                                  tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id))
    return batches, tokenizer


def real_tokens(batch: Batch, pad_id: int) -> int:
    return batch.num_target_tokens + int((batch.source != pad_id).sum())


# ---------------------------------------------------------------- the two systems


class TorchTransformer(nn.Module):
    """torch.nn.Transformer between our embeddings and our tied output layer."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pad_id = config.pad_id
        self.embeddings = Embeddings(config.source_vocab_size, config)
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first"
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(
                d_model=config.d_model, nhead=config.heads, num_encoder_layers=config.layers,
                num_decoder_layers=config.num_decoder_layers, dim_feedforward=config.d_ff,
                dropout=config.dropout, batch_first=True, norm_first=config.norm == "pre")
        self.output_bias = nn.Parameter(torch.zeros(config.target_vocab_size))

    def forward(self, source: Tensor, target_input: Tensor) -> Tensor:
        length = target_input.size(1)  # boolean masks throughout, True: may not look
        future = torch.ones(length, length, dtype=torch.bool, device=source.device).triu(1)
        x = self.transformer(
            self.embeddings(source), self.embeddings(target_input), tgt_mask=future,
            src_key_padding_mask=source == self.pad_id,
            tgt_key_padding_mask=target_input == self.pad_id,
            memory_key_padding_mask=source == self.pad_id, tgt_is_causal=True)
        return F.linear(x, self.embeddings.tokens.weight, self.output_bias)  # as ours


class System:
    """A model with its optimiser; `step` is one training step of translator/training.py."""

    def __init__(self, name: str, model: nn.Module, pad_id: int, smoothing: float) -> None:
        self.name, self.model, self.pad_id, self.smoothing = name, model, pad_id, smoothing
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98),
                                           eps=1e-9)

    def step(self, batch: Batch, precision: str) -> None:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        context = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                   else nullcontext())
        with context:
            logits = self.model(batch.source, batch.target_input)
        loss = token_loss(logits, batch.target_output, self.pad_id, self.smoothing)
        (loss / batch.num_target_tokens).backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()

    def time(self, batches: list[Batch], precision: str) -> float:
        started = time.perf_counter()
        for batch in batches:
            self.step(batch, precision)
        return time.perf_counter() - started


def build_systems(config: ModelConfig, smoothing: float) -> list[System]:
    torch.manual_seed(0)
    ours = System("ours (translator.model)", Transformer(config), config.pad_id, smoothing)
    torch.manual_seed(0)
    theirs = System("torch.nn.Transformer", TorchTransformer(config), config.pad_id, smoothing)
    return [ours, theirs]


# ---------------------------------------------------------------- FLOPs and the peak


def matmul_flops(config: ModelConfig, batch: int, source: int, target: int) -> dict[str, int]:
    """Forward matmul FLOPs of one batch, by kind (the formula in the module docstring)."""
    d, f, v = config.d_model, config.d_ff, config.target_vocab_size
    encoders, decoders = config.layers, config.num_decoder_layers
    return {
        "projections": batch * (encoders * 8 * source * d * d
                                + decoders * (8 * target * d * d + 4 * target * d * d
                                              + 4 * source * d * d)),
        "attention": batch * (encoders * 4 * source * source * d
                              + decoders * (4 * target * target * d + 4 * target * source * d)),
        "feed_forward": batch * 4 * d * f * (encoders * source + decoders * target),
        "output": batch * 2 * target * d * v,
    }


def training_flops(config: ModelConfig, batch: Batch) -> int:
    """Matmul FLOPs of forward + backward for one batch: 3 × the forward's."""
    size, source = batch.source.shape
    return 3 * sum(matmul_flops(config, size, source, batch.target_input.size(1)).values())


def counted_flops(system: System, batch: Batch) -> int:
    """What torch.utils.flop_counter sees in one fp32 step (a check on `training_flops`)."""
    with FlopCounterMode(display=False) as counter:
        system.step(batch, "fp32")
    return counter.get_total_flops()


def matmul_peak(precision: str, size: int = 2048, repeats: int = 8) -> float:
    """Best FLOP/s of a size × size × size torch.matmul in `precision`."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.matmul(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


# ---------------------------------------------------------------- the run


def measure(systems: list[System], warmup: list[Batch], timed: list[Batch], rounds: int,
            precision: str) -> dict[str, float]:
    """Seconds each system spent on `rounds` passes over `timed`, alternating ABBA."""
    for system in systems:
        system.time(warmup, precision)
    seconds = {system.name: 0.0 for system in systems}
    for round_index in range(rounds):
        order = systems if round_index % 2 == 0 else systems[::-1]
        for system in order:
            seconds[system.name] += system.time(timed, precision)
    return seconds


def main() -> int:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = load_config(args.config, args.overrides)
    batches, tokenizer = corpus_batches(config, args.warmup + args.steps)
    if len(batches) < args.warmup + args.steps:
        print(f"error: the corpus gives only {len(batches)} batches; lower --warmup/--steps",
              file=sys.stderr)
        return 2
    model_config = config.model
    model_config.source_vocab_size = model_config.target_vocab_size = tokenizer.source_vocab_size
    model_config.pad_id = tokenizer.pad_id
    warmup, timed = batches[: args.warmup], batches[args.warmup :]
    tokens = sum(real_tokens(b, tokenizer.pad_id) for b in timed)
    padded = sum(b.source.numel() + b.target_input.numel() for b in timed)
    flops = sum(training_flops(model_config, b) for b in timed)
    check = build_systems(model_config, config.train.label_smoothing)[0]
    counted = counted_flops(check, timed[0])
    formula = training_flops(model_config, timed[0])

    rows = []
    for precision in args.precisions:
        peak = matmul_peak(precision)
        systems = build_systems(model_config, config.train.label_smoothing)
        seconds = measure(systems, warmup, timed, args.rounds, precision)
        speeds = {}
        for system in systems:
            elapsed = seconds[system.name]
            speeds[system.name] = args.rounds * tokens / elapsed
            achieved = args.rounds * flops / elapsed
            rows.append(f"| {system.name} | {precision} | {speeds[system.name]:,.0f} "
                        f"| {1000 * elapsed / (args.rounds * len(timed)):,.0f} "
                        f"| {achieved / 1e9:,.1f} | {peak / 1e9:,.0f} "
                        f"| {achieved / peak:.1%} |")
        ours, theirs = (speeds[s.name] for s in systems)
        rows.append(f"| **ours ÷ nn.Transformer** | {precision} | **{ours / theirs:.2f}×** "
                    "| | | | |")

    m = model_config
    lines = [
        f"## Training speed: ours vs torch.nn.Transformer (d_model {m.d_model}, {m.heads} heads, "
        f"{m.layers}+{m.num_decoder_layers} layers, d_ff {m.d_ff}, vocab "
        f"{m.target_vocab_size:,}, dropout {m.dropout})",
        "",
        f"{len(timed)} corpus batches (≤ {config.train.batch_tokens} padded tokens; {tokens:,} "
        f"real tokens, {1 - tokens / padded:.1%} padding; mean "
        f"{statistics.mean(b.source.size(0) for b in timed):.0f} sentences) × {args.rounds} "
        f"alternating rounds after {args.warmup} warm-up steps; forward + backward + clip + "
        f"AdamW; torch {torch.__version__}, threads: {torch.get_num_threads()}. Model FLOPs "
        f"per step by formula {formula / 1e9:.2f} G vs torch.utils.flop_counter "
        f"{counted / 1e9:.2f} G.",
        "",
        "| system | precision | tokens/s | ms/step | model GFLOP/s | matmul peak GFLOP/s "
        "| of peak |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]
    report = "\n".join(lines)
    print(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "train_speed.md").write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
