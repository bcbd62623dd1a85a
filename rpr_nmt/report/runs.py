"""Finished runs as the reports read them: a training run's folder, or its copy under results/.

A run folder holds Hydra's `.hydra/overrides.yaml` and `.hydra/config.yaml`, the trainer's
`train_summary.json`, and for each split it evaluated `hyp_<split>.txt` and `eval_<split>.json`.
The length report also needs each test source's length in BPE tokens: `src_lengths_<split>.txt`
in a collected run (rpr_nmt.report.results), else computed with the BPE model of the run's
`checkpoints/last.pt`. References are read from the corpus the run's config names (its data root
is `${oc.env:RPR_NMT_DATA,...}`, resolved where the report runs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rpr_nmt.config import host_chosen, override_key
from rpr_nmt.model.arithmetic import NEWEST
from rpr_nmt.train.provenance import arithmetic_of

SEED_KEY = "train.seed"


@dataclass
class Run:
    """One finished training run of a sweep."""

    path: Path
    overrides: list[str]
    config: dict[str, Any]  # the run's composed config, resolved
    summary: dict[str, Any]

    @property
    def model(self) -> dict[str, Any]:
        """The run's model section (k, a^K, a^V, sinusoid, ...)."""
        return self.config.get("model", {})

    @property
    def seed(self) -> int | None:
        """train.seed from the config, else from the overrides; None when neither names it."""
        seed = self.config.get("train", {}).get("seed")
        for override in self.overrides:
            if seed is None and override_key(override) == SEED_KEY:
                seed = override.partition("=")[2]
        return None if seed is None else int(seed)

    @property
    def arithmetic(self) -> tuple[int, ...]:
        """The arithmetic of the code that trained it (rpr_nmt.train.provenance)."""
        return arithmetic_of(self.summary)

    @property
    def unfinished(self) -> bool:
        """Stopped before its budget by a signal (Ctrl-C, a sweep's stop): rerunning resumes it."""
        return self.summary.get("stopped_by") == "signal"

    @property
    def test_split(self) -> str:
        """The split the run was tested on (data.test_split)."""
        return str(self.config.get("data", {}).get("test_split", "test"))

    @property
    def tuning(self) -> bool:
        """Trained with train.evaluate_test=false: judged on its validation split alone."""
        return self.config.get("train", {}).get("evaluate_test", True) is False

    @property
    def scored_split(self) -> str:
        """The split whose hypotheses show that the run evaluated: its test split, or its
        validation split for a tuning run."""
        if self.tuning:
            return str(self.config.get("data", {}).get("valid_split", "valid"))
        return self.test_split

    @cached_property
    def flat_config(self) -> dict[str, Any]:
        """The resolved config as dotted keys: {"model.max_relative_position": 16, ...}
        (flattened once: setting_keys and setting both read it). A key the config lacks (added to
        the schema after the run) reads as its default in rpr_nmt.config, which by the project's
        rule keeps what the code computed before the key existed; it comes after the config's."""
        flat = _flatten(self.config)
        return flat | {k: v for k, v in schema_defaults().items() if k not in flat}

    def setting(self, keys: Sequence[str] = ()) -> str:
        """The run's values of `keys` ("model.max_relative_position=16, ..."); with no keys, its
        overrides without the seed ("default" when there are none)."""
        if keys:
            flat = self.flat_config
            return ", ".join(f"{key}={_yaml_value(flat.get(key))}" for key in keys)
        kept = [o for o in self.overrides if override_key(o) != SEED_KEY]
        return ", ".join(kept) or "default"

    def data_config(self) -> Any:
        """The run's data section as a rpr_nmt.config.DataConfig."""
        from rpr_nmt.config import DataConfig, section_from_dict

        where = f"{self.path}/.hydra/config.yaml: data"
        return section_from_dict(DataConfig, dict(self.config.get("data", {})), where)


def setting_keys(runs: Sequence[Run]) -> list[str]:
    """The config keys (dotted) whose values differ between the runs, the seed aside: what makes
    a setting. Runs from different sweeps (a reused baseline) compare by what they trained, not
    by how their overrides were spelt, nor by keys added to the schema since (Run.flat_config).
    Keys in config order."""
    flats = [run.flat_config for run in runs]
    keys = dict.fromkeys(key for flat in flats for key in flat)
    missing = object()
    return [
        key
        for key in keys
        if key != SEED_KEY and len({repr(flat.get(key, missing)) for flat in flats}) > 1
    ]


def differing_keys(a: Run, b: Run, ignored: frozenset[str] = frozenset()) -> list[str]:
    """The config keys (dotted) on which two runs trained differently, `ignored` aside; a key
    one config lacks differs from any value of the other's. Keys in config order."""
    flat_a, flat_b = a.flat_config, b.flat_config
    missing = object()
    return [
        key
        for key in dict.fromkeys([*flat_a, *flat_b])
        if key not in ignored and repr(flat_a.get(key, missing)) != repr(flat_b.get(key, missing))
    ]


@cache
def schema_defaults() -> dict[str, Any]:
    """Every key of a training run's config (dotted) with its default in rpr_nmt.config."""
    from rpr_nmt.config import TrainJobConfig

    return _flatten(asdict(TrainJobConfig()))


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _yaml_value(value: Any) -> str:
    """A config value as an override would spell it: true, null, 0.1, [a, b]."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1000)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _resolved_record(config_path: Path) -> dict[str, Any]:
    """A run's recorded config, resolved here: Hydra records it unresolved (data.root=
    ${oc.env:RPR_NMT_DATA,data}/...), so paths are read where the run is reported. A value the
    training host chose (rpr_nmt.config.HOST_CHOSEN, e.g. ${if_native_bf16:A,B}, recorded so
    before rpr-nmt-train resolved it) is refused: resolved here it would be this host's choice,
    not the run's."""
    record = OmegaConf.load(config_path)
    for key, value in _flatten(OmegaConf.to_container(record, resolve=False)).items():
        if host_chosen(value):
            raise ValueError(
                f"{config_path}: {key} is recorded as {value}, a value chosen by the host that "
                "trained the run (the first where bf16 was native, the second elsewhere); write "
                "the value it trained with in its place (the first when the run's train.log says "
                "bf16 under train.precision=auto, else the second)"
            )
    try:
        return OmegaConf.to_container(record, resolve=True)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "?"
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{config_path}: {key} cannot be read: {why}") from None


def find_runs(sweep_dir: str | Path) -> list[Run]:
    """Every run folder under `sweep_dir` that has a train_summary.json, in a stable order."""
    runs = []
    for summary_path in sorted(Path(sweep_dir).rglob("train_summary.json")):
        run_dir = summary_path.parent
        overrides_path = run_dir / ".hydra" / "overrides.yaml"
        config_path = run_dir / ".hydra" / "config.yaml"
        if not (overrides_path.is_file() and config_path.is_file()):
            continue
        overrides = yaml.safe_load(overrides_path.read_text()) or []
        config = _resolved_record(config_path)
        try:
            summary = json.loads(summary_path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{summary_path}: not JSON ({e}); rerun the run's training command to rewrite it, "
                "or move the run out of the sweep"
            ) from None
        runs.append(Run(run_dir, [str(o) for o in overrides], config, summary))
    return runs


def check_not_tuning(runs: Sequence[Run], sweep_dir: str | Path) -> None:
    """Refuse tuning runs (train.evaluate_test=false): they hold no test hypotheses to report,
    and their table is scripts/tuning_table.py's."""
    tuning = [run for run in runs if run.tuning]
    if tuning:
        raise ValueError(
            f"{tuning[0].path}: a tuning run (train.evaluate_test=false), scored on its "
            f"validation split alone; table the tuning runs with `python scripts/tuning_table.py "
            f"{sweep_dir}`, and report on runs that scored their test split"
        )


def check_same_arithmetic(runs: Sequence[Run]) -> None:
    """Refuse runs trained by code that trains differently (train.arithmetic, recorded per session):
    their differences would be the code's as much as the settings'.

    Raises:
        ValueError: the runs' arithmetic differs; the message names a run of each kind.
    """
    kinds: dict[tuple[int, ...], Run] = {}
    for run in runs:
        kinds.setdefault(run.arithmetic, run)
    if len(kinds) > 1 or any(len(kind) > 1 for kind in kinds):
        named = "; ".join(
            f"{run.path} trained with arithmetic {'+'.join(map(str, kind))}"
            for kind, run in sorted(kinds.items())
        )
        raise ValueError(
            f"these runs were trained by code that trains differently, so their scores do not "
            f"compare: {named} (train_summary.json's sessions; the presets train a new run in "
            f"arithmetic {NEWEST}). Retrain them in one train.arithmetic, or report them apart"
        )


def find_unfinished(sweep_dir: str | Path) -> list[Path]:
    """Run folders under `sweep_dir` that have no train_summary.json yet (running, killed, or
    queued and started), in a stable order: the report names them, since it leaves them out.
    The record of another command (`make demo` evaluates into runs/demo/evaluate/) is no run."""
    return sorted(
        config.parent.parent
        for config in Path(sweep_dir).rglob(".hydra/config.yaml")
        if not (config.parent.parent / "train_summary.json").is_file() and _is_training(config)
    )


def _is_training(config_path: Path) -> bool:
    """Whether a .hydra/config.yaml may be rpr-nmt-train's: not the record of a command that reads
    a checkpoint (evaluate, score, translate: a top-level `checkpoint` and no `train` section). A
    record that cannot be read counts as a run's."""
    try:
        record = yaml.safe_load(config_path.read_text())
    except (OSError, yaml.YAMLError):
        return True
    return not (isinstance(record, dict) and "checkpoint" in record and "train" not in record)


def read_hypotheses(run: Run, split: str, n_lines: int) -> list[str]:
    """The first `n_lines` lines of the run's hyp_<split>.txt (one per test sentence).

    Raises:
        FileNotFoundError: the run has no such file, or fewer lines (it did not evaluate `split`).
    """
    path = run.path / f"hyp_{split}.txt"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the run must evaluate itself at the end (train.evaluate_at_end)"
        )
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if len(lines) < n_lines:
        counted = text.count("\n") + (not text.endswith("\n") and bool(text))  # a last line too
        raise FileNotFoundError(f"{path} has {counted} lines for {n_lines} sentences")
    return lines[:n_lines]


class CorpusText:
    """Each split's raw text read once per report: (sources, references) by data config."""

    def __init__(self) -> None:
        self._read: dict[tuple[str, str], tuple[list[str], list[str]]] = {}

    def parallel(self, run: Run, split: str) -> tuple[list[str], list[str]]:
        """(sources, references) of `split` in the corpus the run's config names.

        Raises:
            rpr_nmt.data.DataError: the corpus is not where the config says; the message names
                the folder and how to point at it.
        """
        from rpr_nmt.data import DataError, read_parallel_text

        data_cfg = run.data_config()
        root = Path(data_cfg.root)
        if data_cfg.source == "local" and not root.is_dir():
            relative = (
                ""
                if root.is_absolute()
                else f" (a relative root is read from the folder the report runs in, {Path.cwd()}: "
                "run the report from the folder the run trained in if its root was not "
                "${oc.env:RPR_NMT_DATA,...})"
            )
            raise DataError(
                f"the corpus of {run.path} is not found: its data.root is {data_cfg.root} here, "
                "not a folder. The report reads references from it: set RPR_NMT_DATA to the "
                f"folder holding {root.name}/{relative}, or give --significance none for a report "
                "without tests or verdicts"
            )
        key = (repr(data_cfg), split)
        if key not in self._read:
            self._read[key] = read_parallel_text(data_cfg, split)
        return self._read[key]

    def references(self, run: Run, split: str) -> list[str]:
        """The references of `split` (see parallel)."""
        return self.parallel(run, split)[1]


def lengths_file(run_dir: Path, split: str) -> Path:
    """Where a collected run keeps its sources' lengths in BPE tokens, one per line."""
    return run_dir / f"src_lengths_{split}.txt"


def bpe_lengths(sources: list[str], checkpoint: Path) -> list[int]:
    """Each source's length in BPE tokens (EOS excluded) under the checkpoint's BPE model."""
    from rpr_nmt.checkpoint import load_checkpoint
    from rpr_nmt.data import Tokenizer

    tokenizer = Tokenizer.from_proto(load_checkpoint(checkpoint).bpe_model)
    return [len(tokenizer.encode(source)) for source in sources]


def source_lengths(run: Run, split: str, text: CorpusText) -> list[int]:
    """Each source sentence's length in BPE tokens: src_lengths_<split>.txt when the run was
    collected, else computed with the BPE model of its checkpoints/last.pt.

    Raises:
        FileNotFoundError: neither the lengths file nor the checkpoint is there.
    """
    path = lengths_file(run.path, split)
    if path.is_file():
        return [int(line) for line in path.read_text().split()]
    checkpoint = run.path / "checkpoints" / "last.pt"
    if not checkpoint.is_file():
        raise FileNotFoundError(
            f"{path} and {checkpoint} are missing: collect the run with its checkpoint "
            "(rpr-nmt-report --collect) to record its source lengths"
        )
    return bpe_lengths(text.parallel(run, split)[0], checkpoint)
