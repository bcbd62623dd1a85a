"""One rank of the DDP equivalence test (launched by test_distributed.py, like torchrun would).

Usage: RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=p python ddp_worker.py OUT.pt [SCOPE]
Runs UPDATES updates of DistributedDataParallel + train_step on batch 2u + rank, saves the weights;
with SCOPE (layers or model), the model wrapped as train.compile=true wraps it.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import PAD, random_batch, tiny_model  # noqa: E402

from rpr_nmt.train import train_step  # noqa: E402
from rpr_nmt.train.distributed import init_distributed  # noqa: E402
from rpr_nmt.train.setup import wrap_model  # noqa: E402

UPDATES = 3


def main(out: str, scope: str | None = None) -> None:
    torch.set_num_threads(1)
    ctx = init_distributed("cpu")
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ddp = wrap_model(model, ctx, compile=scope is not None, scope=scope or "layers")  # DDP inside
    losses = []
    for u in range(UPDATES):
        result = train_step(
            ddp, optimizer, [random_batch(2 * u + ctx.rank, n=2 + ctx.rank)], ctx=ctx,
            autocast=contextlib.nullcontext, scaler=None, pad_id=PAD, label_smoothing=0.1,
            clip_norm=1.0,
        )  # fmt: skip
        losses.append(result.loss)
    if ctx.is_main:
        torch.save({"model": model.state_dict(), "losses": losses}, out)
    ctx.barrier()
    ctx.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
