"""Hydra's side of the typed configs: register the schemas, turn a composed config into them.

The schemas themselves are plain dataclasses in rpr_nmt/config.py. Registering them in Hydra's
ConfigStore under the names the YAML files list first in their defaults (`train_schema`,
`data_schema`, ...) makes Hydra check every key and type while composing. `to_job_config` then
hands the library the dataclass instances themselves (OmegaConf.to_object), with every
interpolation resolved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from rpr_nmt.config import CONFIG_DIR as CONFIG_DIR  # the entry points' config_path
from rpr_nmt.config import (
    DataConfig,
    DecodeConfig,
    EvaluateJobConfig,
    ModelConfig,
    ScoreJobConfig,
    TrainConfig,
    TrainJobConfig,
    TranslateJobConfig,
)


def register_configs() -> None:
    """Store the primary and group schemas; register the run-folder name resolver. Idempotent."""
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainJobConfig)
    cs.store(name="evaluate_schema", node=EvaluateJobConfig)
    cs.store(name="translate_schema", node=TranslateJobConfig)
    cs.store(name="score_schema", node=ScoreJobConfig)
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
    if not OmegaConf.has_resolver("claim_run_dir"):
        # rpr-nmt-evaluate and -score name their folder after the second they start: two
        # commands started in the same second must not share it (configs/hydra/evaluate.yaml).
        OmegaConf.register_new_resolver("claim_run_dir", claim_run_dir)
    if not OmegaConf.has_resolver("if_native_bf16"):
        # A preset's value by the hardware (configs/train/demo.yaml): the first where the device
        # that "auto" picks computes bf16 natively, the second elsewhere.
        OmegaConf.register_new_resolver("if_native_bf16", if_native_bf16)


_CLAIMED: dict[str, str] = {}  # base -> the folder this process claimed for it


def claim_run_dir(base: str) -> str:
    """A new folder for this command: `base` itself when no other command has it, else the first
    of base_2, base_3, ... that is free. Creating the folder is what claims it (mkdir is atomic),
    so commands started in the same second, in parallel, each get their own. The same base asked
    again by this process (Hydra may resolve the setting twice) gives the same folder."""
    if base in _CLAIMED:
        return _CLAIMED[base]
    try:
        Path(base).parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return base  # Hydra says why when it creates the folder
    folder, number = base, 1
    while True:
        try:
            Path(folder).mkdir()
        except FileExistsError:
            number += 1
            folder = f"{base}_{number}"
            continue
        except OSError:
            return folder  # as above: Hydra's error names it
        _CLAIMED[base] = folder
        return folder


def if_native_bf16(native: Any, otherwise: Any) -> Any:
    """`native` where the device "auto" resolves to computes bf16 natively, else `otherwise`."""
    from rpr_nmt.model import resolve_device
    from rpr_nmt.precision import bf16_support

    return native if bf16_support(resolve_device("auto")).native else otherwise


def unknown_keys(cfg: DictConfig, prefix: str = "") -> list[str]:
    """Dotted keys of `cfg` that its schema has no field for: what a `+key=value` override added
    and OmegaConf.to_object would silently drop (e.g. `+model.d_model=64` on rpr-nmt-evaluate)."""
    schema = OmegaConf.get_type(cfg)
    if not dataclasses.is_dataclass(schema):
        return []
    names = {f.name for f in dataclasses.fields(schema)}
    found = []
    for key in cfg:
        if key not in names:
            value = cfg[key]
            leaves = (
                _leaf_keys(OmegaConf.to_container(value)) if isinstance(value, DictConfig) else [""]
            )
            found += [f"{prefix}{key}{leaf}" for leaf in leaves]
        elif dataclasses.is_dataclass(OmegaConf.get_type(cfg, key)):
            found += unknown_keys(cfg[key], f"{prefix}{key}.")
    return found


def unknown_settings(cfg: DictConfig) -> str:
    """One line naming the keys of `cfg` its schema lacks (unknown_keys) and the settings it has;
    "" when every key is known."""
    unknown = unknown_keys(cfg)
    if not unknown:
        return ""
    settings = ", ".join(f.name for f in dataclasses.fields(OmegaConf.get_type(cfg)))
    return (
        f"{', '.join(unknown)}: not a setting of this command, it would be ignored (the settings "
        f"are {settings}; a checkpoint's model is the one it was trained with): remove it"
    )


def _leaf_keys(tree: dict) -> list[str]:
    """ ".a.b" for every leaf of a nested dict."""
    leaves = []
    for key, value in tree.items():
        leaves += (
            [f".{key}{leaf}" for leaf in _leaf_keys(value)]
            if isinstance(value, dict)
            else [f".{key}"]
        )
    return leaves


def to_job_config(cfg: DictConfig) -> Any:
    """The composed config as its schema's dataclass (TrainJobConfig, ...), all values resolved."""
    return OmegaConf.to_object(cfg)


register_configs()
