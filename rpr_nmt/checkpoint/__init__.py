"""Checkpoints: the training state (state.py), the run folder's files (run_folder.py) and its
lock (run_lock.py), and loading a model for translation (inference.py)."""

from rpr_nmt.checkpoint.inference import load_ensemble_members, load_for_inference
from rpr_nmt.checkpoint.run_folder import (
    average_checkpoints,
    average_last,
    checkpoint_paths,
    step_checkpoints,
    write_step_checkpoint,
)
from rpr_nmt.checkpoint.run_lock import RunFolderLockedError, run_folder_lock
from rpr_nmt.checkpoint.state import (
    BestSoFar,
    CheckpointError,
    Progress,
    TrainingState,
    load_checkpoint,
    save_checkpoint,
)

__all__ = [
    "BestSoFar",
    "CheckpointError",
    "Progress",
    "RunFolderLockedError",
    "TrainingState",
    "average_checkpoints",
    "average_last",
    "checkpoint_paths",
    "load_checkpoint",
    "load_ensemble_members",
    "load_for_inference",
    "run_folder_lock",
    "save_checkpoint",
    "step_checkpoints",
    "write_step_checkpoint",
]
