"""scripts/bleu_curve.py: every kept step checkpoint of a tiny run decoded and scored."""

from __future__ import annotations

import json

import pytest

from rpr_nmt.train import train

from ..conftest import load_script
from .conftest import compose_config

curve = load_script("bleu_curve")


def test_each_kept_checkpoint_is_one_point_scored_like_evaluate(corpus, cache_dir, tmp_path):
    settings = ("train.max_steps=4", "train.save_every=2", "train.keep_last=5")
    quiet = ("train.valid_bleu=false", "train.evaluate_at_end=false", "decode.max_sentences=8")
    train(compose_config(corpus, cache_dir, *settings, *quiet), tmp_path / "run")

    assert curve.main([str(tmp_path / "run"), "--beam", "1"]) == 0
    record = json.loads((tmp_path / "run" / "curve_valid.json").read_text())
    assert [p["step"] for p in record["points"]] == [2, 4]
    assert record["split"] == "valid" and record["beam"] == 1
    assert record["weights"] == "raw"  # no average kept (train.ema_decay=0): not "ema" as asked
    for point in record["points"]:
        step_dir = tmp_path / "run" / "curve_valid" / f"step_{point['step']:07d}"
        scored = json.loads((step_dir / "eval_valid.json").read_text())
        assert scored["bleu"] == pytest.approx(point["bleu"])  # the file evaluate writes
        assert len((step_dir / "hyp_valid.txt").read_text().splitlines()) == 16


def test_table_shows_the_gain_over_the_previous_point():
    points = [curve.Point(300, 20.0, 50.0), curve.Point(600, 25.5, 55.25)]
    assert curve.format_table(points).splitlines()[2:] == [
        "| 300 | 20.00 | 50.00 |  |",
        "| 600 | 25.50 | 55.25 | +5.50 |",
    ]


def test_a_run_without_step_checkpoints_is_one_line_and_status_2(tmp_path, capsys):
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    assert curve.main([str(tmp_path / "run")]) == 2
    assert "has no step_XXXXXXX.pt: train with train.save_every=N" in capsys.readouterr().err


def test_a_misspelt_run_folder_is_named_as_missing(tmp_path, capsys):
    # It used to be told to train with train.save_every=N, as if the folder were there.
    assert curve.main([str(tmp_path / "rnu")]) == 2
    assert "rnu: no such run folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "named"), [(["--beam", "0"], "beam_size"), (["--alpha", "nan"], "length_penalty")]
)
def test_a_decode_setting_that_cannot_work_is_refused_before_any_checkpoint(
    tmp_path, capsys, args, named
):
    # --beam 0 used to load the first checkpoint and end in a ValueError traceback.
    with pytest.raises(SystemExit) as exit:
        curve.main([str(tmp_path / "run"), *args])
    assert exit.value.code == 2 and named in capsys.readouterr().err
