"""Hydra's side of the typed configs: register the schemas, turn a composed config into them.

The schemas themselves are plain dataclasses in rpr_nmt/config.py. Registering them in Hydra's
ConfigStore under the names the YAML files list first in their defaults (`train_schema`,
`data_schema`, ...) makes Hydra check every key and type while composing. `to_job_config` then
hands the library the dataclass instances themselves (OmegaConf.to_object), with every
interpolation resolved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from rpr_nmt.config import (
    DataConfig,
    DecodeConfig,
    EvaluateJobConfig,
    ModelConfig,
    TrainConfig,
    TrainJobConfig,
    TranslateJobConfig,
)

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")


def register_configs() -> None:
    """Store the primary and group schemas; register the run-folder name resolver. Idempotent."""
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainJobConfig)
    cs.store(name="evaluate_schema", node=EvaluateJobConfig)
    cs.store(name="translate_schema", node=TranslateJobConfig)
    for group, node in (
        ("data", DataConfig),
        ("model", ModelConfig),
        ("train", TrainConfig),
        ("decode", DecodeConfig),
    ):
        cs.store(group=group, name=f"{group}_schema", node=node)
    if not OmegaConf.has_resolver("or_default"):
        # Run folders are named after the overrides; an empty override list gets a name too.
        OmegaConf.register_new_resolver("or_default", lambda value, default: value or default)


def to_job_config(cfg: DictConfig) -> Any:
    """The composed config as its schema's dataclass (TrainJobConfig, ...), all values resolved."""
    return OmegaConf.to_object(cfg)


register_configs()
