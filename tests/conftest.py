"""Fixtures shared by several test files."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Models this small run fastest on one thread, also when the machine is busy (several
    threads each then wait for a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
