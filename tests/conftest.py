"""Fixtures shared by several test files, and the ``cuda`` marker's skip."""

import os

import pytest
import torch


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
