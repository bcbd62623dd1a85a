"""rpr-nmt-train's run folders from Hydra's side (rpr_nmt.cli.run_folder): sweeps that would
collapse into one folder, folder names, and the refusals that come before Hydra writes."""

from __future__ import annotations

import errno
import os
import shutil

import pytest
from omegaconf import DictConfig, open_dict, read_write

from rpr_nmt.cli.run_folder import (
    NAME_MAX_BYTES,
    RefuseBusyRunFolder,
    RefuseCollapsingSweep,
    collapsing_sweep_overrides,
    describe_os_error,
    run_folder_name,
)
from tests.conftest import compose_command
from tests.train.conftest import make_corpus, run_train, tiny_overrides


def multirun_config(command_line: list[str], composed: tuple[str, ...] = ()) -> DictConfig:
    """The config a multirun's callbacks get: `composed` (no sweeps) composed, and the command
    line as Hydra records it (with its sweep overrides, unparsed)."""
    config = compose_command(composed, hydra=True)
    with read_write(config), open_dict(config):
        config.hydra.overrides.task = command_line
    return config


@pytest.mark.parametrize(
    "sweep",
    ["train.max_steps=10,20", "train.max_time_minutes=range(10,30,10)", "train.device=cpu,cuda"],
)
def test_a_sweep_over_a_key_left_out_of_the_folder_name_is_refused(sweep, capsys):
    # Probe D2: train.max_steps=10,20 trained both values in one folder, the second continuing.
    config = multirun_config(["train.seed=1,2", sweep])
    assert collapsing_sweep_overrides(config) == [sweep]
    with pytest.raises(SystemExit) as refused:
        RefuseCollapsingSweep().on_multirun_start(config)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rpr-nmt-train: error: ") and err.count("\n") == 1
    assert sweep in err and "hydra.sweep.dir" in err


def test_experiment_sweeps_and_single_values_are_not_refused():
    # where_positions sweeps positions and model.positions_in (both name folders); a single
    # train.max_steps on the command line of a sweep is no sweep of it.
    command_line = ["experiment=where_positions", "train.seed=1,2,3", "train.max_steps=1400"]
    config = multirun_config(command_line, ("experiment=where_positions",))
    assert "positions" in config.hydra.sweeper.params
    assert collapsing_sweep_overrides(config) == []
    RefuseCollapsingSweep().on_multirun_start(config)  # returns
    config = multirun_config(["experiment=ablate_k,ablate_terms", "hydra.sweep.dir=a,b"])
    assert collapsing_sweep_overrides(config) == []  # they place runs, in other folders
    for subdir in ("steps_${train.max_steps}", "${hydra.job.num}"):  # a folder per value
        config = multirun_config(["train.max_steps=10,20"], (f"hydra.sweep.subdir={subdir}",))
        assert collapsing_sweep_overrides(config) == []


def test_the_refusal_comes_before_anything_trains(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    args = [o for o in tiny_overrides(tmp_path, cache, tmp_path / "unused") if "hydra." not in o]
    done = run_train(["-m", *args, "train.max_steps=1,2", f"hydra.sweep.dir={sweep}"], timeout=60)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("rpr-nmt-train: error: the sweep varies train.max_steps=1,2")
    assert "Traceback" not in done.stderr
    assert not sweep.exists() and not cache.exists()


# Fourteen ordinary overrides: a folder name of more than 255 bytes (probe C4).
LONG = [
    "data=local", "data.root=corpus", "data.vocab_size=300", "model=transformer_tiny",
    "train.max_tokens=500", "train.valid_every=5", "train.save_every=5", "train.log_every=5",
    "train.valid_bleu_sentences=10", "train.warmup_steps=5", "model.dropout=0.15",
    "model.attention_dropout=0.15", "train.label_smoothing=0.05", "train.adam_beta2=0.997",
]  # fmt: skip


def run_dir(overrides: list[str]) -> str:
    """hydra.run.dir of rpr-nmt-train with these overrides, as the job sees it."""
    from hydra.core.hydra_config import HydraConfig

    config = compose_command(overrides, hydra=True)
    saved = HydraConfig.instance().cfg
    HydraConfig.instance().set_config(config)
    try:
        return config.hydra.run.dir
    finally:
        HydraConfig.instance().cfg = saved


def test_a_folder_name_too_long_for_the_file_system_is_shortened(monkeypatch):
    # Probe C4: "OSError: [Errno 36] File name too long" with a traceback.
    monkeypatch.setenv("RPR_NMT_RUNS", "runs")
    name = run_dir(LONG).removeprefix("runs/train/")
    assert "/" not in name and len(name.encode()) <= 200
    assert name.startswith("data.root=corpus,data.vocab_size=300,data=local,")
    assert run_dir(LONG) == run_dir(list(reversed(LONG)))  # one command, one folder
    assert run_dir(LONG[:-1] + ["train.adam_beta2=0.998"]) != run_dir(LONG)


def test_names_a_file_system_takes_are_unchanged():
    # Published runs resume by folder name: every name that worked before stays as it was.
    assert run_folder_name("") == "default"
    for name in ("x", "a=1,b=2" * 30, "x" * NAME_MAX_BYTES, "ü" * (NAME_MAX_BYTES // 2)):
        assert run_folder_name(name) == name
    long = "a=" + "ü" * 200  # a cut in a 2-byte letter leaves no broken character
    short = run_folder_name(long)
    assert len(short.encode()) <= 200 and short.encode().decode() == short
    assert short != run_folder_name(long + "x")


def test_a_path_in_an_override_does_not_nest_the_run_folder(monkeypatch, tmp_path):
    # Probe K5: data.root=/abs/path put the run in runs/train/data.root=/abs/path,.../.
    monkeypatch.setenv("RPR_NMT_RUNS", str(tmp_path))
    path = run_dir(["data=local", "data.root=/data/corpus", "train.seed=2"])
    assert path == f"{tmp_path}/train/data.root=%2Fdata%2Fcorpus,data=local,train.seed=2"
    assert run_dir(["data=local", "train.seed=2"]) == f"{tmp_path}/train/data=local,train.seed=2"


def refusal(callback, config: DictConfig, capsys) -> str:
    """The callback's one line on stderr (it must exit with status 2)."""
    with pytest.raises(SystemExit) as refused:
        callback(config)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("under", ["", "/run"])
def test_a_file_where_the_run_or_sweep_folder_goes_is_one_line(tmp_path, capsys, under):
    # Probe C6: hydra.run.dir=<a file> was a warning and a FileExistsError traceback.
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    config = multirun_config([], (f"hydra.run.dir={afile}{under}",))
    err = refusal(RefuseBusyRunFolder().on_run_start, config, capsys)
    assert err.startswith(f"rpr-nmt-train: error: hydra.run.dir={afile}{under}: ")
    assert f"{afile} is a file, not a folder" in err
    config = multirun_config([], (f"hydra.sweep.dir={afile}{under}",))
    err = refusal(RefuseBusyRunFolder().on_multirun_start, config, capsys)
    assert f"hydra.sweep.dir={afile}{under}: {afile} is a file, not a folder" in err


def test_a_read_only_run_folder_is_one_line(tmp_path, capsys, monkeypatch):
    # Probe C5 (a read-only mount; chmod does not stop root, so the file system's answer is
    # stood in for): "Unable to configure handler 'file'" or "Read-only file system" tracebacks.
    import os

    class ReadOnly:
        f_flag = os.ST_RDONLY

    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(str(ro)))
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    for run in (ro, ro / "new"):
        config = multirun_config([], (f"hydra.run.dir={run}",))
        err = refusal(RefuseBusyRunFolder().on_run_start, config, capsys)
        assert f"hydra.run.dir={run}: {ro} is on a read-only file system" in err


def test_a_file_where_the_data_cache_goes_is_one_line(tmp_path):
    # Probe C6: RPR_NMT_CACHE=<a file> was a NotADirectoryError traceback from data/bpe.py.
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    corpus = make_corpus(tmp_path / "corpus", n_train=20)
    done = run_train(tiny_overrides(corpus, afile, tmp_path / "run"), timeout=60)
    assert done.returncode == 2, done.stderr[-3000:]
    assert (
        done.stderr.startswith("rpr-nmt-train: error: cannot use ")
        and "Traceback" not in done.stderr
    )
    assert done.stderr.count("\n") == 1
    assert f"{afile} is a file, not a folder: give another data.cache_dir" in done.stderr
    done = run_train(tiny_overrides(corpus, tmp_path / "cache", afile), timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-3000:]
    assert f"hydra.run.dir={afile}: {afile} is a file, not a folder" in done.stderr


def test_a_cache_dir_given_with_a_tilde_is_named_in_the_error(monkeypatch, tmp_path):
    # RPR_NMT_CACHE='~/c' is the home folder's c (rpr_nmt.config.DataConfig): name the setting.
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "c").write_text("x\n")
    error = NotADirectoryError(errno.ENOTDIR, "Not a directory", str(tmp_path / "c" / "bpe"))
    line = describe_os_error(error, {"data.cache_dir (RPR_NMT_CACHE)": "~/c"})
    assert line.endswith(": give another data.cache_dir (RPR_NMT_CACHE)")


def test_the_record_holds_the_hosts_choices_as_it_chose_them():
    # The demo's batch size and warm-up are ${if_native_bf16:A,B}: recorded unresolved, a report
    # on another host read the other value (or stopped: the report has no such resolver).
    from omegaconf import OmegaConf

    from rpr_nmt.cli.config_store import if_native_bf16
    from rpr_nmt.cli.run_folder import with_host_choices_resolved

    config = compose_command(["train=demo"])
    recorded = OmegaConf.create(OmegaConf.to_yaml(with_host_choices_resolved(config)))
    assert recorded.train.max_tokens == if_native_bf16(6000, 2000) == config.train.max_tokens
    assert recorded.train.warmup_steps == if_native_bf16(400, 100)
    raw = OmegaConf.to_container(recorded, resolve=False)
    assert raw["data"]["root"].startswith("${oc.env:RPR_NMT_DATA")  # read where it is reported
    assert "if_native_bf16" not in OmegaConf.to_yaml(recorded)
    del raw["train"]["max_tokens"], raw["train"]["warmup_steps"]
    as_hydra = OmegaConf.to_container(config, resolve=False)
    del as_hydra["train"]["max_tokens"], as_hydra["train"]["warmup_steps"]
    assert raw == as_hydra  # nothing else changed


def test_a_folder_removed_under_a_running_command_is_named_in_one_line(tmp_path):
    # TensorBoard's writer names its event file in bytes when the run folder has been removed
    # under it: Path(bytes) had raised a TypeError, a traceback instead of the line.
    run = tmp_path / "run"
    (run / "tb").mkdir(parents=True)
    shutil.rmtree(run)
    with pytest.raises(FileNotFoundError) as raised:
        os.open(os.fsencode(run / "tb" / "events.out"), os.O_WRONLY | os.O_CREAT)
    assert isinstance(raised.value.filename, bytes)
    line = describe_os_error(raised.value, {"hydra.run.dir": str(run)})
    assert line == (
        f"cannot use {run / 'tb' / 'events.out'}: the folder {run} (hydra.run.dir) no longer "
        "exists: was it removed while the command ran?"
    )


def test_a_missing_file_in_a_folder_that_exists_is_not_called_a_removed_folder(tmp_path):
    error = FileNotFoundError(errno.ENOENT, "No such file or directory", str(tmp_path / "x.pt"))
    line = describe_os_error(error, {"-o": str(tmp_path)})
    assert "no longer exists" not in line
    assert line.startswith(f"cannot use {tmp_path / 'x.pt'}: ")


def test_a_record_is_not_restored_into_a_removed_run_folder(tmp_path):
    from rpr_nmt.cli.run_folder import RunRecord, restore_run_record

    record = RunRecord(tmp_path / "run" / ".hydra", {"config.yaml": None}, None)
    restore_run_record(record)  # the folder was removed while the command ran: nothing to do
    assert not (tmp_path / "run").exists()
