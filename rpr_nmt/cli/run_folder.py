"""rpr-nmt-train's run folders from Hydra's side: their names, their .hydra/ record, and the
Hydra callbacks that refuse a run folder before anything is written into it.

run_folder_name, the resolver configs/hydra/train.yaml names run folders with: the override
string, unchanged where a file system takes it (as every name did before it), with '/' written
%2F so that a path in an override does not nest the folder, shortened to a readable prefix and a
hash of the whole where it would be longer than a file name may be (.hydra/overrides.yaml keeps
every override).

The record: the job writes .hydra/config.yaml, hydra.yaml and overrides.yaml itself
(configs/hydra/train.yaml sets hydra.output_subdir to null): write_run_record saves them as Hydra
would (values the training host chose, such as the demo's batch size, resolved as it chose them),
remembers what it replaced, and a refused command (another model config, a setting
refused before training, a busy folder) puts the previous record back with restore_run_record, so
rpr-nmt-report never labels a run with settings it did not train with. This works alike for
single runs and every job of a sweep, in any launcher.

RefuseBusyRunFolder: a run folder that is a file or read-only, or that another trainer holds
(train.max_steps and train.max_time_minutes do not name the folder, so a second command meets a
running one), is refused in one line before Hydra opens its log there; in a sweep, the sweep
folder is checked likewise, and each job's trainer refuses a busy folder by its lock
(rpr_nmt.checkpoint.run_lock).

RefuseCollapsingSweep: a sweep (-m) that varies a key the run folder is not named after
(configs/hydra/train.yaml's exclude_keys: train.max_steps, ...) would train every value in one
folder, each continuing the one before; it is refused before any run starts.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rpr_nmt.checkpoint.run_lock import LOCK_FILE, run_folder_in_use
from rpr_nmt.config import host_chosen, override_key


def folder_problem(path: str | Path) -> str:
    """Why `path` cannot be a folder to write in: "PATH is a file, not a folder", "PATH is on a
    read-only file system", "PATH is not writable"; "" when it can be (or be created)."""
    path = Path(path)
    nearest = path  # the folder itself, or the nearest of its parents that exists
    while not nearest.exists() and nearest.parent != nearest:
        nearest = nearest.parent
    if not nearest.is_dir():
        return f"{nearest} is a file, not a folder"
    if os.access(nearest, os.W_OK | os.X_OK):
        return ""
    try:
        read_only = bool(os.statvfs(nearest).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{nearest} is on a read-only file system" if read_only else f"{nearest} is not writable"


def _refuse_folder(setting: str, path: str | Path) -> None:
    """Exit with status 2 and one line if `path`, the value of `setting`, cannot be written in."""
    problem = folder_problem(path)
    if problem:
        print(
            f"rpr-nmt-train: error: {setting}={path}: {problem}: give a folder that can be "
            f"written in ({setting}=...)",
            file=sys.stderr,
        )
        sys.exit(2)


class RefuseBusyRunFolder(Callback):
    """on_run_start: exit with status 2 and one line if the run folder cannot be written in (a
    file, a read-only file system) or another trainer holds it (naming the holder);
    on_multirun_start: the same for the sweep folder, before the sweeper creates it."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        if int(os.environ.get("RANK", "0")) > 0:
            return  # torchrun's other ranks: their job's rank 0 holds (or is taking) the lock
        HydraConfig.instance().set_config(config)  # hydra.run.dir interpolates ${hydra:...}
        _refuse_folder("hydra.run.dir", config.hydra.run.dir)
        busy = run_folder_in_use(config.hydra.run.dir)
        if busy:
            print(f"rpr-nmt-train: error: {busy}", file=sys.stderr)
            sys.exit(2)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse_folder("hydra.sweep.dir", config.hydra.sweep.dir)


def describe_os_error(error: OSError, settings: dict[str, str]) -> str:
    """One line for a file the trainer could not write or read: the path, the reason, which
    setting names the folder (`settings`: setting -> folder, e.g. data.cache_dir -> its value).
    A folder removed while the command ran (TensorBoard's writer then names its file in bytes) is
    named as gone."""
    path = Path(os.fsdecode(error.filename))
    folders = {name: Path(folder).expanduser() for name, folder in settings.items()}
    where = next((name for name, folder in folders.items() if _inside(path, folder)), None)
    gone = _vanished_folder(path) if error.errno == errno.ENOENT else None
    if gone is not None:
        named = f" ({where})" if where else ""
        return (
            f"cannot use {path}: the folder {gone}{named} no longer exists: was it removed "
            "while the command ran?"
        )
    if error.errno in (errno.ENOTDIR, errno.EEXIST):  # a file on the way, or where a folder goes
        reason = folder_problem(path)
    else:  # e.g. EROFS, EACCES: the folder the file is in
        reason = folder_problem(path.parent)
    reason = reason or error.strerror or type(error).__name__
    hint = f": give another {where}" if where else ""
    return f"cannot use {path}: {reason}{hint}"


def _vanished_folder(path: Path) -> Path | None:
    """The outermost missing folder above `path` (under one that exists); None when the folder
    `path` is in exists (a missing file, not a missing folder)."""
    folder = path.absolute().parent
    if folder.exists():
        return None
    while not folder.parent.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def _inside(path: Path, folder: Path) -> bool:
    return path.absolute().is_relative_to(folder.absolute())


NAME_MAX_BYTES = 255  # the longest file name of Linux, macOS and Windows file systems
SHORT_NAME_BYTES = 200  # a shortened name's length: room to append to it
SLASH = "%2F"  # a '/' in an override's value, which would nest the folder


def run_folder_name(overrides: str, default: str = "default") -> str:
    """A run folder's name for its override string (Hydra's job.override_dirname).

    "" gives `default`. A '/' (data.root=/data/corpus) would nest the folder in others: it
    becomes "%2F", as in a URL (names without one are unchanged). A name of more than
    NAME_MAX_BYTES (about 14 overrides; the file system would refuse it) becomes its first whole
    overrides within SHORT_NAME_BYTES, then "..." and 16 hex digits of the SHA-256 of the whole
    name: one command still maps to one folder.
    """
    name = (overrides or default).replace("/", SLASH)
    data = name.encode("utf-8")
    if len(data) <= NAME_MAX_BYTES:
        return name
    digest = hashlib.sha256(data).hexdigest()[:16]
    head = data[: SHORT_NAME_BYTES - len(digest) - 3].decode("utf-8", "ignore")
    if "," in head:
        head = head[: head.rindex(",")]  # whole overrides only
    return f"{head}...{digest}"


if not OmegaConf.has_resolver("run_folder_name"):
    OmegaConf.register_new_resolver("run_folder_name", run_folder_name)

RECORD_DIR = ".hydra"


@dataclass
class RunRecord:
    """What write_run_record replaced: each file's previous bytes (None: there was none),
    checkpoints/last.pt's identity then (None: there was none), and the job log's size then (what
    it held before this command: 0 for a new folder)."""

    folder: Path
    previous: dict[str, bytes | None]
    last_checkpoint: tuple[int, int, int] | None
    log_size: int = 0


def _last_checkpoint(run_dir: Path) -> tuple[int, int, int] | None:
    """(inode, mtime in ns, size) of checkpoints/last.pt: a new save changes it."""
    try:
        st = (run_dir / "checkpoints" / "last.pt").stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def with_host_choices_resolved(cfg: DictConfig) -> DictConfig:
    """A copy of `cfg`, unresolved as Hydra records it (data.root=${oc.env:...} is read again where
    the run is reported), except values chosen by the training host (rpr_nmt.config.HOST_CHOSEN:
    configs/train/demo.yaml's ${if_native_bf16:6000,2000}), recorded as this host chose them:
    read on another host they would name a batch size the run did not train with."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    copy = OmegaConf.create(raw)

    def visit(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, f"{path}.{key}" if path else str(key))
        elif host_chosen(node):
            OmegaConf.update(copy, path, OmegaConf.select(cfg, path), force_add=True)

    visit(raw, "")
    return copy


def write_run_record(task_cfg: DictConfig, run_dir: str | Path) -> RunRecord:
    """Write RUN_DIR/.hydra/config.yaml, hydra.yaml and overrides.yaml as Hydra would (in the
    running job), with the host's choices resolved (with_host_choices_resolved); returns what
    they replaced, for restore_run_record."""
    run_dir = Path(run_dir)
    hydra_cfg = HydraConfig.instance().cfg  # {"hydra": ...}, the job's, as Hydra saves it
    files = {
        "config.yaml": with_host_choices_resolved(task_cfg),
        "hydra.yaml": hydra_cfg,
        "overrides.yaml": hydra_cfg.hydra.overrides.task,
    }
    folder = run_dir / RECORD_DIR
    previous = {n: (folder / n).read_bytes() if (folder / n).is_file() else None for n in files}
    log = run_dir / JOB_LOG
    log_size = log.stat().st_size if log.is_file() else 0
    record = RunRecord(folder, previous, _last_checkpoint(run_dir), log_size)
    folder.mkdir(parents=True, exist_ok=True)
    for name, node in files.items():
        _write(folder / name, OmegaConf.to_yaml(node).encode("utf-8"))
    return record


def restore_run_record(record: RunRecord) -> None:
    """After a refusal: the record as it was before write_run_record, unless the refused session
    saved a checkpoint (then its settings are what the run holds, and stay), or the run folder
    has been removed meanwhile (nothing to put back into)."""
    if not record.folder.is_dir():
        return
    if _last_checkpoint(record.folder.parent) != record.last_checkpoint:
        return
    for name, data in record.previous.items():
        if data is None:
            (record.folder / name).unlink(missing_ok=True)
        else:
            _write(record.folder / name, data)
    if not any(record.folder.iterdir()):
        record.folder.rmdir()
    _remove_if_nothing_in(record.folder.parent, record.log_size)


JOB_LOG = "train.log"  # Hydra's file handler: <hydra.job.name>.log in the run folder


def _remove_if_nothing_in(run_dir: Path, log_size: int) -> None:
    """Remove a run folder that holds nothing but what a refused command left there (the
    trainer's lock, released, and a job log that was empty before it, `log_size` 0: what the
    command logged before its refusal, e.g. the precision auto chose): a refused new run leaves
    no folder behind, which a report would take for an unfinished run."""
    try:
        found = {p.name: p for p in run_dir.iterdir()}
        if set(found) - {LOCK_FILE, JOB_LOG} or log_size:
            return
    except OSError:
        return
    if run_folder_in_use(run_dir):  # another trainer holds it
        return
    for path in found.values():
        path.unlink(missing_ok=True)
    try:
        run_dir.rmdir()
    except OSError:  # something arrived meanwhile: leave it
        pass


# Keys that place a run instead of naming it: varying them sends the runs to other folders (an
# experiment names its own sweep folder), not all into one.
_PLACING_KEYS = ("experiment",)
_PLACING_PREFIX = "hydra."


def sweep_override_lines(config: DictConfig) -> list[str]:
    """A multirun's overrides as the basic sweeper reads them: the experiment's
    hydra.sweeper.params first, then the command line (the last of a key counts)."""
    params = config.hydra.sweeper.get("params") or {}
    return [f"{key}={value}" for key, value in params.items()] + list(config.hydra.overrides.task)


def collapsing_sweep_overrides(config: DictConfig) -> list[str]:
    """The sweep overrides (`key=a,b`, range(...), choice(...)) of a multirun config whose key is
    left out of the run-folder name, as written: every value of one would train in one folder.

    The experiment's hydra.sweeper.params come first and the command line after, as the basic
    sweeper reads them; the last override of a key is the one that counts, so a single value on
    the command line (train.max_steps=1400) is no sweep. A hydra.sweep.subdir that names the key
    (`steps_${train.max_steps}`) or the job's number gives each value its own folder.
    """
    subdir = str(OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir", ""))
    if "job.num" in subdir or "job.id" in subdir:
        return []
    name = config.hydra.job.config.override_dirname
    excluded = set(name.exclude_keys)
    try:
        overrides = OverridesParser.create().parse_overrides(sweep_override_lines(config))
    except HydraException:  # another sweeper's grammar: left to that sweeper
        return []
    last = {o.key_or_group: o for o in overrides}
    return [
        o.input_line
        for key, o in last.items()
        if o.is_sweep_override()
        and key in excluded
        and f"${{{key}}}" not in subdir
        and key not in _PLACING_KEYS
        and not key.startswith(_PLACING_PREFIX)
    ]


class RefuseCollapsingSweep(Callback):
    """on_multirun_start: exit with status 2 and one line if the sweep varies a key that does not
    name the run folder (its runs would all train in one folder)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        collapsing = collapsing_sweep_overrides(config)
        if collapsing:
            keys = ", ".join(override_key(line) for line in collapsing)
            print(
                f"rpr-nmt-train: error: the sweep varies {', '.join(collapsing)}, but {keys} "
                "does not name the run folder (configs/hydra/train.yaml, exclude_keys: a rerun "
                "with another value extends the run), so every value would train in one folder, "
                "each continuing the one before: run one command per value, each with its own "
                "hydra.sweep.dir=... (or hydra.run.dir=...)",
                file=sys.stderr,
            )
            sys.exit(2)
