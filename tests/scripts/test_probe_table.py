"""scripts/probe_table.py: inspected runs gathered into one table per setting and stack."""

from __future__ import annotations

import json

import pytest

from ..conftest import load_script

probe_table = load_script("probe_table")


def inspected(folder, model: dict, encoder_r2: list[float], seed: int):
    folder.mkdir(parents=True)
    probe = [
        dict(stack=stack, r2=r2, mae=[1.0] * len(r2), baseline_r2=0.1, baseline_mae=4.0,
             fitted=10, held_out=9)
        for stack, r2 in (("encoder", encoder_r2), ("decoder", [0.2, 0.5, 0.6]))
    ]  # fmt: skip
    numbers = dict(checkpoint=f"seed{seed}/last.pt", step=1400, sentences=19, split="valid",
                   position_probe=probe, **model)  # fmt: skip
    (folder / "inspect.json").write_text(json.dumps(numbers))
    return folder


def test_runs_of_one_setting_share_a_row_with_their_mean_and_range(tmp_path):
    shaw = dict(max_relative_position=16, relative_keys=True, relative_values=True)
    sinusoid = dict(max_relative_position=0, sinusoidal=True)
    runs = [
        probe_table.read_run(inspected(tmp_path / "a", shaw, [0.1, 0.4, 0.6], 1)),
        probe_table.read_run(inspected(tmp_path / "b", shaw, [0.1, 0.6, 0.8], 2)),
        probe_table.read_run(inspected(tmp_path / "c", sinusoid, [0.9, 0.8, 0.7], 1)),
    ]
    lines = probe_table.table(runs).splitlines()
    assert lines[0] == "| setting | stack | runs | token alone | layer 0 | layer 1 | layer 2 |"
    assert (
        lines[2] == "| sinusoid | encoder | 1 | 0.10 | 0.90 | 0.80 | 0.70 |"
    )  # the reports' order
    assert lines[3] == "| Shaw k = 16 | encoder | 2 | 0.10 (0.10 to 0.10) | 0.10 (0.10 to 0.10) " \
        "| 0.50 (0.40 to 0.60) | 0.70 (0.60 to 0.80) |"  # fmt: skip
    assert [line.split(" | ")[1] for line in lines[4:]] == ["decoder", "decoder"]


def refused(capsys, call, named: str) -> None:
    """call() refuses in one line on stderr naming `named`, with exit status 2."""
    with pytest.raises(SystemExit) as exit_:
        call()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and named in err and err.count("\n") == 1, err


def test_a_folder_without_the_probe_names_itself(tmp_path, capsys):
    refused(capsys, lambda: probe_table.read_run(tmp_path), "inspect.json")


def test_main_prints_the_table_and_writes_each_runs_figures(tmp_path, monkeypatch, capsys):
    rope = dict(max_relative_position=0, relative_positions="rope")
    none = dict(max_relative_position=0)
    folders = [
        inspected(tmp_path / "rope", rope, [0.1, 0.3, 0.5], 1),
        inspected(tmp_path / "none", none, [0.1, 0.2, 0.3], 1),
    ]
    out = tmp_path / "probe.json"
    monkeypatch.setattr("sys.argv", ["probe_table.py", *map(str, folders), "--json", str(out)])
    probe_table.main()
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| none", "| RoPE", "| none", "| RoPE"]
    written = json.loads(out.read_text())
    assert [run["setting"] for run in written] == ["RoPE", "none"]  # as given
    assert set(written[0]) == {"setting", "checkpoint", "step", "sentences", "split", "probe"}


def test_an_inspect_json_that_is_no_object_names_itself(tmp_path, capsys):
    (tmp_path / "inspect.json").write_text("[1, 2]")  # used to end in an AttributeError
    refused(capsys, lambda: probe_table.read_run(tmp_path), "inspect.json: no position probe")


@pytest.mark.parametrize(
    ("drop", "named"),
    [("checkpoint", "inspect.json: no 'checkpoint'"), ("r2", "position_probe[0] lacks one of")],
)
def test_an_inspect_json_without_a_key_the_table_reads_names_it(tmp_path, capsys, drop, named):
    # Valid JSON without a key it reads used to end in a KeyError traceback.
    folder = inspected(tmp_path / "a", dict(max_relative_position=0), [0.1, 0.2], 1)
    numbers = json.loads((folder / "inspect.json").read_text())
    numbers.pop(drop, None)
    numbers["position_probe"][0].pop(drop, None)
    (folder / "inspect.json").write_text(json.dumps(numbers))
    refused(capsys, lambda: probe_table.read_run(folder), named)


@pytest.mark.parametrize(
    "depths", [([0.1, 0.2, 0.3], [0.5, 0.6, 0.7, 0.8]), ([0.1] * 4, [0.5] * 3)]
)
def test_runs_of_one_setting_with_other_depths_are_refused(tmp_path, capsys, depths):
    # They used to be averaged layer by layer, the deeper run's last layers left out (or, the
    # deeper run first, an IndexError).
    runs = [
        probe_table.read_run(inspected(tmp_path / str(seed), {}, r2, seed))
        for seed, r2 in enumerate(depths)
    ]
    refused(capsys, lambda: probe_table.table(runs), "differ in encoder layers")


@pytest.mark.parametrize("kept", ["encoder", "decoder"])
def test_an_inspect_json_with_one_stack_probed_names_the_missing_one(tmp_path, capsys, kept):
    # It used to end in an IndexError at probes[0] (alone) or count fewer runs (beside a whole one).
    folder = inspected(tmp_path / "a", {}, [0.1, 0.2, 0.3], 1)
    numbers = json.loads((folder / "inspect.json").read_text())
    numbers["position_probe"] = [p for p in numbers["position_probe"] if p["stack"] == kept]
    (folder / "inspect.json").write_text(json.dumps(numbers))
    missing = "decoder" if kept == "encoder" else "encoder"
    refused(capsys, lambda: probe_table.read_run(folder), f"inspect.json: no {missing} probe")
