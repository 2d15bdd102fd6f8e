"""The CUDA code path (issue 16): cached and uncached search agree on the GPU, bf16 and fp16
training steps stay finite, the fp16 gradient scaler skips an overflowing step, and a run
trained on the GPU loads, translates and resumes on the CPU.

Every test here is marked ``cuda`` and skipped without a GPU (tests/conftest.py). With
TRANSLATOR_CUDA_TESTS_ON_CPU=1 they run on the CPU instead, fp16 through CPU autocast:
``bench/gpu_check.py --cpu-rehearsal`` does that, so the tests themselves have run once before
the GPU call that needs them (``bench/gpu_check.py`` runs them there first).
"""

import math
import os
import shutil
from pathlib import Path

import pytest
import torch

import translator.build as build
from translator.build import Run, build_run
from translator.checkpoint import load_checkpoint
from translator.config import load_config
from translator.data import embedded_corpus_dir, load_splits
from translator.model import ModelConfig, Transformer
from translator.run_dir import RunDir
from translator.search import beam_search, greedy_search
from translator.tokenizer import Tokenizer
from translator.training import Trainer, train
from translator.translate import Translator

ON_CPU = os.environ.get("TRANSLATOR_CUDA_TESTS_ON_CPU") == "1"
DEVICE = "cpu" if ON_CPU else "cuda"
SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"
PAD, BOS, EOS = 0, 2, 3
VOCAB = 40

pytestmark = pytest.mark.cuda


@pytest.fixture
def any_precision(monkeypatch):
    """On the CPU stand-in, let fp16 through (resolve_precision refuses it on CPUs)."""
    if ON_CPU:
        monkeypatch.setattr(build, "resolve_precision", lambda precision, device: precision)


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    """1,200 train and 20 dev pairs of the embedded corpus, no test split: quick on a CPU."""
    folder = tmp_path_factory.mktemp("data")
    for split, count in (("train", 1200), ("dev", 20)):
        lines = (embedded_corpus_dir() / f"{split}.tsv").read_text(encoding="utf-8").split("\n")
        (folder / f"{split}.tsv").write_text("\n".join(lines[:count]) + "\n", encoding="utf-8")
    return folder


def tiny_config(data: Path, output_dir: Path, *overrides: str):
    """The smoke model on DEVICE, trained on ``small_data``."""
    return load_config(SMOKE, ["data.source=files", f"data.train_path={data / 'train.tsv'}",
                               f"data.dev_path={data / 'dev.tsv'}", "train.batch_tokens=600",
                               f"train.output_dir={output_dir}", f"train.device={DEVICE}",
                               "train.heatmaps=false", *overrides])


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, small_data) -> Path:
    """One SentencePiece model of the smoke config for every run of this module."""
    config = tiny_config(small_data, tmp_path_factory.mktemp("unused"))
    train_pairs = load_splits(config.data).splits["train"]
    folder = tmp_path_factory.mktemp("tokenizer")
    Tokenizer.train(config.tokenizer, [p.source for p in train_pairs],
                    [p.target for p in train_pairs], folder)
    return folder


def cuda_run(data: Path, tmp_path: Path, tokenizer_dir: Path, *overrides: str) -> Run:
    """build_run on DEVICE with the module's tokenizer (resume=True reuses it, nothing else)."""
    run_dir = RunDir(tmp_path / "run")
    shutil.copytree(tokenizer_dir, run_dir.tokenizer_dir)
    return build_run(tiny_config(data, tmp_path, *overrides), run_dir, resume=True)


def parameters(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def changed(before: list[torch.Tensor], model: torch.nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def random_model() -> Transformer:
    """A small random model whose EOS bias makes outputs end at many lengths."""
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, heads=4, layers=2, d_ff=64, dropout=0.0,
                         source_vocab_size=VOCAB, target_vocab_size=VOCAB, pad_id=PAD,
                         max_positions=64)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output_bias[EOS] += 2.5
    return model.to(DEVICE)


def random_source() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    rows = [torch.randint(4, VOCAB, (n - 1,), generator=generator).tolist() + [EOS]
            for n in (9, 4, 12, 2, 7, 9)]
    width = max(map(len, rows))
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows], device=DEVICE)


def test_cached_and_uncached_search_agree():
    model, source = random_model(), random_source()
    for search, kwargs in ((greedy_search, {}), (beam_search, {"beam_size": 4, "n_best": 4})):
        cached = search(model, source, BOS, EOS, use_cache=True, **kwargs)
        uncached = search(model, source, BOS, EOS, use_cache=False, **kwargs)
        if search is greedy_search:
            cached, uncached = [[h] for h in cached], [[h] for h in uncached]
        for with_cache, without in zip(cached, uncached):
            assert [h.tokens for h in with_cache] == [h.tokens for h in without]
            assert [h.score for h in with_cache] == pytest.approx(
                [h.score for h in without], abs=1e-4)
            for h in with_cache:
                assert h.cross_attention.device.type == "cpu"
                assert torch.isfinite(h.cross_attention).all()


def test_search_under_bf16_autocast_gives_finite_hypotheses():
    model, source = random_model(), random_source()
    with torch.autocast(device_type=DEVICE, dtype=torch.bfloat16):
        greedy = greedy_search(model, source, BOS, EOS)
        beams = beam_search(model, source, BOS, EOS, beam_size=4)
    for hypothesis in greedy + [n[0] for n in beams]:
        assert math.isfinite(hypothesis.score)
        assert len(hypothesis.tokens) <= 64 and EOS not in hypothesis.tokens


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_autocast_training_steps_are_finite(small_data, tmp_path, tokenizer_dir, precision,
                                            any_precision):
    run = cuda_run(small_data, tmp_path, tokenizer_dir, f"train.precision={precision}")
    assert run.device.type == DEVICE and run.precision == precision
    assert run.scaler.is_enabled() == (precision == "fp16")
    trainer = Trainer(run)
    batches = trainer.batches()
    before = parameters(run.model)
    losses = [trainer.train_step(batches)[0] for _ in range(4)]
    assert all(math.isfinite(loss) for loss in losses)
    assert changed(before, run.model)
    assert all(torch.isfinite(p).all() for p in run.model.parameters())
    assert all(p.dtype == torch.float32 for p in run.model.parameters())  # autocast, not .half()


def test_the_fp16_grad_scaler_skips_an_overflowing_step(small_data, tmp_path, tokenizer_dir,
                                                        any_precision):
    run = cuda_run(small_data, tmp_path, tokenizer_dir, "train.precision=fp16")
    trainer = Trainer(run)
    batches = trainer.batches()
    trainer.train_step(batches)  # the scaler's scale exists from the first scale() on
    run.scaler.update(2.0**40)  # gradients × 2^40 overflow fp16
    before = parameters(run.model)
    loss, _ = trainer.train_step(batches)
    assert math.isfinite(loss)  # the loss itself stays finite
    assert not changed(before, run.model), "an overflowing step must be skipped"
    assert run.scaler.get_scale() < 2.0**40  # and the scale backs off
    assert trainer.step == 2  # the step is counted all the same, as in any AMP loop
    run.scaler.update(1024.0)
    trainer.train_step(batches)
    assert changed(before, run.model)
    assert all(torch.isfinite(p).all() for p in run.model.parameters())


def test_a_run_trained_on_cuda_loads_translates_and_resumes_on_the_cpu(small_data, tmp_path):
    config = tiny_config(small_data, tmp_path, "train.run_name=gpu", "train.max_steps=4",
                         "train.eval_every=4", "train.eval_sentences=5", "train.log_every=2",
                         "train.precision=auto")
    run_dir, code = train(config)
    assert code == 0
    state = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    assert all(t.device.type == "cpu" for t in state["model"].values())
    on_cpu = Translator.from_run(run_dir, device="cpu")
    assert next(on_cpu.model.parameters()).device.type == "cpu"
    for name, tensor in on_cpu.model.state_dict().items():
        if name in state["model"]:
            assert torch.equal(tensor, state["model"][name]), name
    result = on_cpu.translate(["मुझे भूख लगी है।"], beam_size=2)[0]
    assert result.attention is not None and torch.isfinite(result.attention).all()

    resumed = RunDir.open(run_dir).read_config(["train.device=cpu", "train.precision=fp32",
                                                "train.max_steps=6"])
    _, code = train(resumed, resume=run_dir)
    assert code == 0
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 6
