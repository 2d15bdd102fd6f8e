"""Processes: one, or several launched by torchrun (DistributedDataParallel). Every helper
works alike for one process, so the training loop has a single code path.

    rank, world_size = init_distributed()
    if any_process(out_of_time, device): ...
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


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


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def mean_over_processes(value: float, device: torch.device) -> float:
    """The mean of ``value`` over all processes (``value`` itself for one)."""
    if world_size() == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.item() / world_size()


def any_process(flag: bool, device: torch.device) -> bool:
    """True if ``flag`` is true in any process: all processes stop together."""
    if world_size() == 1:
        return flag
    tensor = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(tensor)
    return tensor.item() > 0


def from_main_process(value: object) -> object:
    """Rank 0's ``value``, in every process."""
    if not dist.is_initialized():
        return value
    shared = [value]
    dist.broadcast_object_list(shared, src=0)
    return shared[0]


def close_distributed() -> None:
    """Wait for every process, then end the process group (nothing for one process)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` wrapped in DistributedDataParallel under torchrun (one process too), so that
    gradients are averaged over processes; ``model`` itself otherwise."""
    if not dist.is_initialized():
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
