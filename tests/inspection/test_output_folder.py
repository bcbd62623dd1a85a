"""rpr-nmt-inspect -o into a folder that holds anything is refused; --force replaces a previous
inspection there, its files alone, so that no figure of the model inspected before stays (probe
K4: an ALiBi model's alibi_slopes.png stayed beside a Shaw model's figures)."""

from __future__ import annotations

import json

from rpr_nmt.cli.inspect import main as inspect_main
from tests.inspection.conftest import tiny_checkpoint  # noqa: F401  (a fixture)
from tests.inspection.test_statistics import checkpoint_of

ALIBI = dict(relative_positions="alibi", max_relative_position=0)


def test_a_previous_inspection_is_replaced_only_with_force(tiny_checkpoint, tmp_path, capsys):  # noqa: F811
    alibi = checkpoint_of(tiny_checkpoint, tmp_path, **ALIBI)
    out = tmp_path / "inspect"
    assert inspect_main([str(alibi), "-o", str(out), "--sentences", "4"]) == 0
    assert (out / "alibi_slopes.png").is_file()
    (out / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    shaw = [str(tiny_checkpoint), "-o", str(out), "--sentences", "4"]
    assert inspect_main(shaw) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-inspect: error: -o {out} is not empty: choose another folder, or pass --force "
        "to replace the inspection in it\n"
    )
    assert (out / "alibi_slopes.png").is_file()
    assert inspect_main([*shaw, "--force"]) == 0
    assert not (out / "alibi_slopes.png").exists()
    assert (out / "encoder_table_norms.png").is_file() and (out / "notes.txt").is_file()
    assert "alibi" not in (out / "index.md").read_text()


def test_force_does_not_empty_a_folder_that_holds_no_inspection(tiny_checkpoint, tmp_path, capsys):  # noqa: F811
    (tmp_path / "notes.txt").write_text("mine\n")
    args = [str(tiny_checkpoint), "-o", str(tmp_path), "--sentences", "4", "--force"]
    assert inspect_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no previous inspection (index.md, inspect.json)" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_default_distance_counts_past_k(tiny_checkpoint, tmp_path):  # noqa: F811
    # W = k = 16 made the +-W bins (all distances beyond) part of "within +-k": always 1.000.
    path = checkpoint_of(tiny_checkpoint, tmp_path, max_relative_position=16)
    out = tmp_path / "inspect"
    assert inspect_main([str(path), "-o", str(out), "--sentences", "4"]) == 0
    assert json.loads((out / "inspect.json").read_text())["max_distance"] == 17
    assert "within ±k" in (out / "index.md").read_text()
