"""Process groups from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK), and small collectives.

A single process without those variables runs with world_size 1 and never touches torch.distributed,
so the same trainer serves a laptop, one GPU, `torchrun --nproc_per_node N` and torchrun's
multi-node rendezvous. A job torchrun started joins a process group even with one process (nccl on
one GPU is then the same code path as on eight), and so does any job of several processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from rpr_nmt.model import resolve_device
from rpr_nmt.train.errors import PeerError, SettingsError

# How long a collective may wait for the slowest rank. Rank 0 prepares the data (BPE training and
# encoding: over an hour for WMT14 En-Fr's 36M pairs on two cores, longer when the hub streams it)
# while the other ranks wait in a barrier of this group, so the defaults (10 minutes for NCCL,
# 30 for gloo) would end the job. One long timeout on the group is the simplest wait that works for
# both backends and across nodes; a file-based wait would need a file system shared by all nodes,
# which the barrier does not. The cost: a collective that hangs during training is reported after
# this long rather than after minutes.
PROCESS_GROUP_TIMEOUT = timedelta(hours=4)


@dataclass
class DistributedContext:
    """Where this process sits among the training processes.

    Attributes:
        rank: global rank, 0 for the process that logs and writes checkpoints.
        world_size: number of processes.
        local_rank: rank on this machine (selects the GPU).
        device: the device this process trains on.
        owns_group: whether this context created the process group (and so destroys it).
        grouped: whether this process is in a process group: gradients and the stop request
            go through its collectives (also with one process, under torchrun).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False
    grouped: bool = False

    @property
    def is_main(self) -> bool:
        """True on the process that logs, writes TensorBoard events and checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when gradients are synchronised through the process group."""
        return self.grouped

    @property
    def backend(self) -> str | None:
        """The process group's backend ("nccl", "gloo"), None without a group."""
        return str(dist.get_backend()) if self.distributed and dist.is_initialized() else None

    def barrier(self) -> None:
        """Wait for every process (no-op in a single process)."""
        if self.distributed:
            dist.barrier()

    def share_main_outcome(self, failure: str | None) -> None:
        """Rank 0's outcome of a step the other ranks wait for (None: it succeeded); a failure ends
        them with PeerError, which prints nothing (rank 0 reports it), instead of the collective
        error of a lost peer. Every rank calls it at the same point."""
        if not self.distributed:
            return
        box = [failure]
        dist.broadcast_object_list(box, src=0, device=self.device)
        if box[0] is not None and not self.is_main:
            raise PeerError(box[0])

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Sum a small float64 vector over processes; returns it on CPU."""
        if not self.distributed:
            return values
        work = values.to(self.device)
        dist.all_reduce(work, op=dist.ReduceOp.SUM)
        return work.cpu()

    def close(self) -> None:
        """Destroy the process group if this context created it (multirun jobs share a process)."""
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
        self.owns_group = False


def init_distributed(device_name: str) -> DistributedContext:
    """Read torchrun's environment and join the process group (nccl on CUDA, gloo on CPU).

    A group is joined when there are several processes or torchrun started this one (it sets
    TORCHELASTIC_RUN_ID); otherwise, e.g. WORLD_SIZE=1 from a launcher's environment, this is a
    single process and no group (nor its port) is created.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    try:
        device = resolve_device(device_name, local_rank)
    except ValueError as e:
        raise SettingsError(f"train.device: {e}") from e
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world_size == 1 and "TORCHELASTIC_RUN_ID" not in os.environ:
        return DistributedContext(device=device)
    owns = False
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend=backend, rank=rank, world_size=world_size, timeout=PROCESS_GROUP_TIMEOUT
        )
        owns = True
    return DistributedContext(
        rank=rank, world_size=world_size, local_rank=local_rank, device=device, owns_group=owns,
        grouped=True,
    )  # fmt: skip
