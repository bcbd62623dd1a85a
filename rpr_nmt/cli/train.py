"""rpr-nmt-train: compose the training config with Hydra and run the Trainer.

    rpr-nmt-train data=multi30k_en_de model=transformer_small train.max_steps=2000
    rpr-nmt-train -m experiment=ablate_k                          # a sweep: one job after another
    torchrun --nproc_per_node 2 -m rpr_nmt.cli.train train.update_freq=4

The run directory is Hydra's output directory (named after the overrides, so rerunning a command
resumes it). Bad data, an incompatible checkpoint or impossible settings print one line on stderr
and exit with status 2; a diverged run exits with status 3. SIGINT (Ctrl-C) or SIGTERM makes the run
finish its update and save, then ends the command with status 130; in a sweep, every running run
saves and the queued ones do not start (rpr_nmt.cli.sweep_stop). The same command resumes. A run
that fails in a sweep does not end it: the others train on, and the command names the failed runs
and exits with their status at the end (rpr_nmt.cli.sweep_failures).
"""

from __future__ import annotations

import gc
import logging
import os
import sys

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.cli.override_errors import refuse_bad_overrides
from rpr_nmt.cli.run_folder import describe_os_error, restore_run_record, write_run_record
from rpr_nmt.cli.sweep_failures import end_failed_run
from rpr_nmt.cli.sweep_stop import STOPPED_STATUS, run_stop_file
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.train.primitive_cache import limit_primitive_cache

log = logging.getLogger("rpr_nmt.train")


@hydra.main(config_path=CONFIG_DIR, config_name="train", version_base="1.3")
def train_job(cfg: DictConfig) -> None:
    """Train one job of the composed config in Hydra's output directory."""
    from rpr_nmt.data import DataError
    from rpr_nmt.decode.constraints import PositionLimitError
    from rpr_nmt.train import DivergenceError, SettingsError, train
    from rpr_nmt.train.errors import PeerError

    rank0 = int(os.environ.get("RANK", "0")) == 0
    if not rank0:  # rank 0 alone writes the log
        logging.getLogger().setLevel(logging.WARNING)
    hydra_cfg = HydraConfig.get()
    run_dir = hydra_cfg.runtime.output_dir
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    stop = run_stop_file() if in_sweep else None
    if stop is not None and stop.exists():
        log.warning("the sweep is stopping: %s does not start (rerun to resume)", run_dir)
        return
    # .hydra/ (hydra.output_subdir is null): a refused command puts the previous one back.
    record = write_run_record(cfg, run_dir) if rank0 else None
    failed: tuple[int, str] | None = None  # (exit status, the one line)
    try:
        summary = train(to_job_config(cfg), run_dir, stop_file=stop)
    except (DataError, CheckpointError, SettingsError, PositionLimitError) as e:
        if record is not None:
            restore_run_record(record)
        failed = 2, f"rpr-nmt-train: error: {e}"
    except OSError as e:  # a file where a folder should be, a read-only file system, ...
        if e.filename is None:
            raise
        if record is not None:
            restore_run_record(record)
        folders = {"data.cache_dir (RPR_NMT_CACHE)": cfg.data.cache_dir, "hydra.run.dir": run_dir}
        failed = 2, f"rpr-nmt-train: error: {describe_os_error(e, folders)}"
    except PeerError:  # rank 0 prints the error and fails the job; failing here too would
        return  # have the launcher stop rank 0, maybe before it has printed
    except DivergenceError as e:
        failed = 3, f"rpr-nmt-train: training diverged: {e}"
    finally:
        # Hydra multirun runs the next job in this process: free this one's model, data, CUDA cache.
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    if failed is not None:  # exits, or in a sweep records it and lets the other runs go on
        end_failed_run(run_dir, hydra_cfg.job.num if in_sweep else None, *failed)
        return
    if summary.get("stopped_by") == "signal" and not in_sweep:  # a sweep ends in sweep_stop
        done = "stopped and saved" if summary.get("session_steps") else "stopped before training"
        if rank0:
            print(f"rpr-nmt-train: {done} in {run_dir}; rerun to resume", file=sys.stderr)
        sys.exit(STOPPED_STATUS)


def main() -> None:
    """rpr-nmt-train from the command line, an override that cannot work refused first."""
    limit_primitive_cache()  # before the config's bf16 probe builds oneDNN's first primitive
    refuse_bad_overrides("rpr-nmt-train", TrainJobConfig)
    train_job()


if __name__ == "__main__":
    main()
