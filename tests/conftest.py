"""Fixtures shared by several test files, and the ``cuda`` marker's skip."""

import os

import pytest
import torch

from translator.config import Config, ModelConfig, TokenizerConfig, config_to_dict
from translator.data import embedded_corpus_dir
from translator.model import Transformer
from translator.run_dir import RunDir
from translator.tokenizer import Tokenizer


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a GPU: skipped without one, unless
    TRANSLATOR_CUDA_TESTS_ON_CPU=1 asks to run them on the CPU (tests/test_cuda.py)."""
    if torch.cuda.is_available() or os.environ.get("TRANSLATOR_CUDA_TESTS_ON_CPU") == "1":
        return
    skip = pytest.mark.skip(reason="needs CUDA: no GPU is visible")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def one_thread():
    """Models this small run fastest on one thread, also when the machine is busy (several
    threads each then wait for a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A run folder holding an untrained tiny model (random weights, 32 positions) and a
    SentencePiece model of 300 embedded pairs: enough to load, translate and plot with, built
    in a second, without training."""
    path = tmp_path_factory.mktemp("tiny") / "run"
    path.mkdir()
    run = RunDir(path)
    rows = [line.split("\t")[:2] for line in
            (embedded_corpus_dir() / "train.tsv").read_text(encoding="utf-8").splitlines()[:300]]
    tokenizer = Tokenizer.train(TokenizerConfig(vocab_size=400), [h for h, _ in rows],
                                [e for _, e in rows], run.tokenizer_dir)
    config = Config(model=ModelConfig(d_model=16, heads=2, layers=1, d_ff=32, dropout=0.0,
                                      max_positions=32,
                                      source_vocab_size=tokenizer.source_vocab_size,
                                      target_vocab_size=tokenizer.target_vocab_size))
    config.train.device = "cpu"
    run.write_config(config)
    torch.manual_seed(0)
    model = Transformer(config.model)
    run.save_checkpoint("last", {"model": model.state_dict(), "config": config_to_dict(config),
                                 "tokenizer": tokenizer.fingerprint(), "step": 0})
    return path
