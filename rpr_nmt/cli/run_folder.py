"""A Hydra callback of rpr-nmt-train: refuse a run folder that another trainer holds, before Hydra
writes into it.

Hydra saves the job's .hydra/config.yaml, hydra.yaml and overrides.yaml before the task starts, so
a second command on a busy folder (train.max_steps and train.max_time_minutes do not name the
folder) would replace the running trainer's record of its settings even though the trainer's own
lock (rpr_nmt.checkpoint.run_lock) then refuses it. This check runs first, for single runs; in a
sweep each job's trainer refuses by its lock.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from rpr_nmt.checkpoint.run_lock import run_folder_in_use


class RefuseBusyRunFolder(Callback):
    """on_run_start: exit with status 2 and one line naming the holder if the folder is busy."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if int(os.environ.get("RANK", "0")) > 0:
            return  # torchrun's other ranks: their job's rank 0 holds (or is taking) the lock
        HydraConfig.instance().set_config(config)  # hydra.run.dir interpolates ${hydra:...}
        busy = run_folder_in_use(config.hydra.run.dir)
        if busy:
            print(f"rpr-nmt-train: error: {busy}", file=sys.stderr)
            sys.exit(2)
