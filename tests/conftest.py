"""Fixtures shared by several test files, and the ``cuda`` marker's skip."""

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from translator.batching import make_batch
from translator.checkpoint import save_checkpoint
from translator.config import (
    Config,
    ModelConfig,
    TokenizerConfig,
    config_to_dict,
    load_config,
    save_config,
)
from translator.corpus import read_split
from translator.data import DataConfig, embedded_corpus_dir
from translator.direction import TAGS
from translator.model import Transformer
from translator.recipe import token_loss
from translator.run_dir import RunDir
from translator.tokenizer import EOS_ID, Tokenizer

SMOKE = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"
FITTED_POSITIONS = 64  # the fitted run's max_positions

# hypothesis draws the same examples on every run (a failure in CI is one a developer gets
# again) and keeps no example database (no .hypothesis/ folder in the repository)
settings.register_profile("repeatable", derandomize=True, database=None)
settings.load_profile("repeatable")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a GPU: skipped without one, unless
    TRANSLATOR_CUDA_TESTS_ON_CPU=1 asks to run them on the CPU (tests/test_cuda.py)."""
    if torch.cuda.is_available() or os.environ.get("TRANSLATOR_CUDA_TESTS_ON_CPU") == "1":
        return
    skip = pytest.mark.skip(reason="needs CUDA: no GPU is visible")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


class SteppingClock:
    """The time module, but time.time() moves on ``tick`` seconds at each call: a training
    step then takes the same time on a fast machine and a loaded one."""

    def __init__(self, tick: float = 1.0) -> None:
        self.now, self.tick = 0.0, tick

    def time(self) -> float:
        self.now += self.tick
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


@pytest.fixture(scope="session")
def stepping_clock() -> type[SteppingClock]:
    """`SteppingClock`, for test files (a fixture, so that they need not import conftest)."""
    return SteppingClock


@pytest.fixture(scope="module")
def one_thread():
    """Models this small run fastest on one thread, also when the machine is busy (several
    threads each then wait for a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_untrained_run(path: Path, model: dict, direction: str = "hi-en",
                        tokenizer: TokenizerConfig | None = None, seed: int = 0,
                        perturb: bool = True, eos_bias: float = 0.0,
                        adjust: Callable[[Config], None] | None = None) -> Path:
    """A run folder at ``path`` with an untrained model of the ``model`` settings (over a tiny
    default: d_model 32, 4 heads, one layer, 48 positions) and SentencePiece models of 300
    embedded pairs (``tokenizer``: 400 pieces by default). ``perturb`` moves LayerNorms and
    biases away from 1 and 0, so that an exporter's mix-up shows; ``eos_bias`` is added to
    EOS's output bias; ``adjust`` edits the config before it is written."""
    run = RunDir(path)
    path.mkdir(parents=True)
    rows = [line.split("\t")[:2] for line in
            (embedded_corpus_dir() / "train.tsv").read_text(encoding="utf-8").splitlines()[:300]]
    tags = list(TAGS.values()) if direction == "both" else ()
    trained = Tokenizer.train(tokenizer or TokenizerConfig(vocab_size=400), [h for h, _ in rows],
                              [e for _, e in rows], run.tokenizer_dir, tags=tags)
    settings = dict(d_model=32, heads=4, layers=1, d_ff=64, dropout=0.0, max_positions=48,
                    source_vocab_size=trained.source_vocab_size,
                    target_vocab_size=trained.target_vocab_size) | model
    config = Config(data=DataConfig(direction=direction), model=ModelConfig(**settings))
    config.train.device = "cpu"
    if adjust is not None:
        adjust(config)
    run.write_config(config)
    torch.manual_seed(seed)
    weights = Transformer(config.model)
    with torch.no_grad():
        if perturb:
            for name, parameter in weights.named_parameters():
                if "norm" in name or name.endswith("bias"):
                    parameter.add_(0.2 * torch.randn_like(parameter))
        weights.output_bias[EOS_ID] += eos_bias
    run.save_checkpoint("last", {"model": weights.state_dict(), "config": config_to_dict(config),
                                 "tokenizer": trained.fingerprint(), "step": 0})
    return path


@pytest.fixture(scope="session")
def untrained_run():
    """`write_untrained_run`, for test files (a fixture, so that they need not import conftest)."""
    return write_untrained_run


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A run folder holding an untrained tiny model (random weights, 32 positions) and a
    SentencePiece model of 300 embedded pairs: enough to load, translate and plot with, built
    in a second, without training."""
    return write_untrained_run(tmp_path_factory.mktemp("tiny") / "run",
                               dict(d_model=16, heads=2, d_ff=32, max_positions=32),
                               perturb=False)


def fitted_pairs(pairs: list[tuple[str, str, str]] | None = None) -> list[tuple[str, str]]:
    """The 32 short (Hindi, English) pairs `write_fitted_run` fits its model to: those of at
    most 8 Hindi words among ``pairs`` (None: the first 600 of the embedded train split)."""
    pairs = pairs or read_split("train")[:600]
    return [(hi, en) for hi, en, _ in pairs if len(hi.split()) <= 8][:32]


def write_fitted_run(run_dir: Path, pairs: list[tuple[str, str, str]] | None = None,
                     steps: int = 40) -> Path:
    """A run folder as training writes it (config.yaml, tokenizer/, checkpoints/best.pt): the
    smoke config with two layers, `FITTED_POSITIONS` positions and 500 pieces, trained on
    ``pairs`` (None: the first 600 of the embedded train split), its model fitted ``steps``
    Adam steps to 32 short pairs, so that its outputs end at different lengths, as a trained
    model's do. A few seconds, without the trainer."""
    pairs = pairs or read_split("train")[:600]
    short = fitted_pairs(pairs)
    config = load_config(SMOKE, [f"model.max_positions={FITTED_POSITIONS}", "model.layers=2",
                                 "tokenizer.vocab_size=500"])
    tokenizer = Tokenizer.train(config.tokenizer, [hi for hi, _, _ in pairs],
                                [en for _, en, _ in pairs], run_dir / "tokenizer")
    config.model.source_vocab_size = tokenizer.source_vocab_size
    config.model.target_vocab_size = tokenizer.target_vocab_size
    torch.manual_seed(0)
    model = Transformer(config.model)
    batch = make_batch([tokenizer.encode_source(hi) for hi, _ in short],
                       [tokenizer.encode_target(en) for _, en in short],
                       tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(steps):
        logits = model(batch.source, batch.target_input)
        loss = token_loss(logits, batch.target_output, tokenizer.pad_id, 0.0)
        optimizer.zero_grad()
        (loss / batch.num_target_tokens).backward()
        optimizer.step()
    save_config(config, run_dir / "config.yaml")
    save_checkpoint({"model": model.state_dict(), "config": config_to_dict(config),
                     "step": steps, "tokenizer": tokenizer.fingerprint()},
                    run_dir / "checkpoints" / "best.pt")
    return run_dir


@pytest.fixture(scope="session")
def fitted_run_writer():
    """`write_fitted_run`, for test files (a fixture, so that they need not import conftest)."""
    return write_fitted_run


@pytest.fixture(scope="session")
def fitted_run_pairs() -> list[tuple[str, str]]:
    """`fitted_pairs` of the default run: the sentences `fitted_run` knows by heart."""
    return fitted_pairs()


@pytest.fixture(scope="session")
def fitted_run(tmp_path_factory) -> Path:
    """`write_fitted_run`'s run, shared by the test files that read a fitted tiny run (copy it
    before changing it)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return write_fitted_run(tmp_path_factory.mktemp("runs") / "fitted")
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory) -> dict[str, list[str]]:
    """Overrides that train on small TSV files cut from the embedded corpus, for quick runs:
    "general" (800 training and 60 dev pairs of every domain but health, 60 test pairs) and
    "health" (300 health pairs to fine-tune on, 40 dev pairs)."""
    folder = tmp_path_factory.mktemp("small_corpus")
    train, dev = read_split("train"), read_split("dev") + read_split("dev2")
    sets = {"general_train": [p for p in train if p[2] != "health"][:800],
            "general_dev": [p for p in dev if p[2] != "health"][:60],
            "general_test": [p for p in read_split("test") if p[2] != "health"][:60],
            "health_train": [p for p in train if p[2] == "health"][:300],
            "health_dev": [p for p in dev if p[2] == "health"][:40]}
    for name, pairs in sets.items():
        (folder / f"{name}.tsv").write_text("".join(f"{hi}\t{en}\n" for hi, en, _ in pairs),
                                            encoding="utf-8")
    return {kind: ["data.source=files", f"data.train_path={folder}/{kind}_train.tsv",
                   f"data.dev_path={folder}/{kind}_dev.tsv"]
            + ([f"data.test_path={folder}/general_test.tsv"] if kind == "general"
               else ["data.test_path=null"])
            for kind in ("general", "health")}
