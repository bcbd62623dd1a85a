"""A sweep's settings, every job's, checked before any job trains.

Each run checks its own settings before it prepares data (rpr_nmt.train.setup.check_job_settings),
but in a sweep that check comes job by job: `positions=absolute,none model.positions_in=encoder`
trained the sinusoid, then stopped the sweep at `none` (one stack of no method), and in the other
order stopped it before the sinusoid trained, leaving a run folder behind. The callback below
(configs/hydra/train.yaml, `hydra.callbacks`) composes each job's config in the launching process
as the basic sweeper lists the jobs, and refuses the sweep in one line naming the job and the
setting, before anything trains or any folder is made.

Only what a job's config alone decides is checked here (no data, no device). A job whose config
does not compose here (another sweeper's grammar, a value only the job's own process resolves) is
left to report itself when it runs.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # its own job expansion
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.cli.run_folder import sweep_override_lines

# As rpr_nmt.report.runs.SEED_KEY, not imported from there: the report package would bring
# matplotlib and sacrebleu into every rpr-nmt-train's start.
SEED_KEY = "train.seed"


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Each job's overrides as the basic sweeper launches them: the experiment's
    hydra.sweeper.params first, then the command line, every sweep expanded; [] when the overrides
    are another sweeper's grammar."""
    try:
        overrides = OverridesParser.create().parse_overrides(sweep_override_lines(config))
        (jobs,) = BasicSweeper.split_arguments(overrides, max_batch_size=None)
    except HydraException:
        return []
    return jobs


def job_problem(overrides: list[str]) -> str | None:
    """What check_job_settings refuses in the job these overrides compose, in one line; None when
    nothing, or when the config does not compose outside the job (left to the job)."""
    from rpr_nmt.train.errors import SettingsError
    from rpr_nmt.train.setup import check_job_settings

    try:
        if GlobalHydra.instance().is_initialized():  # inside rpr-nmt-train: its config search path
            cfg = compose("train", overrides=overrides)
        else:
            with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
                cfg = compose("train", overrides=overrides)
        config = to_job_config(cfg)
    except (HydraException, OmegaConfBaseException, ValueError, TypeError):
        return None
    try:
        check_job_settings(config)
    except SettingsError as e:
        return str(e)
    return None


def sweep_problem(jobs: list[list[str]]) -> str | None:
    """The first job whose settings a run would refuse, in one line naming the job by its number
    and the values the sweep varies; None when every job passes. Each setting is checked once,
    its seeds aside (no check reads the seed)."""
    values = [dict(o.split("=", 1) for o in overrides if "=" in o) for overrides in jobs]
    swept = [key for key in values[0] if len({v.get(key) for v in values}) > 1] if jobs else []
    checked: dict[tuple[str, ...], str | None] = {}
    for number, overrides in enumerate(jobs):
        setting = tuple(o for o in overrides if not o.startswith(f"{SEED_KEY}="))
        if setting not in checked:
            checked[setting] = job_problem(overrides)
        if problem := checked[setting]:
            varied = " ".join(f"{key}={values[number][key]}" for key in swept)
            return f"job {number} of the sweep ({varied}): {problem}"
    return None


def launcher_problem(config: DictConfig) -> str | None:
    """What the launcher would refuse only with a traceback, in one line; None when nothing."""
    if OmegaConf.select(config, "hydra.launcher.n_jobs") == 0:  # joblib: no meaning
        return "hydra.launcher.n_jobs=0 runs no job: set the jobs at once, e.g. 2 (-1: all cores)"
    return None


class RefuseInvalidSweep(Callback):
    """on_multirun_start: exit with status 2 and one line naming the first job whose settings a
    run would refuse, or the launcher setting that runs none, before any job starts."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if problem := launcher_problem(config):
            print(f"rpr-nmt-train: error: {problem}", file=sys.stderr)
            sys.exit(2)
        if problem := sweep_problem(sweep_jobs(config)):
            print(
                f"rpr-nmt-train: error: {problem}; nothing trained: leave that value out of the "
                "sweep",
                file=sys.stderr,
            )
            sys.exit(2)
