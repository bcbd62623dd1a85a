"""scripts/bench_runner.py: the configs the training benchmarks share."""

from __future__ import annotations

import pytest

from ..conftest import load_script

runner = load_script("bench_runner")


@pytest.mark.parametrize(
    ("model", "data", "named"),
    [("transformer_smal", "multi30k_en_de", "'model/transformer_smal': one of transformer_base"),
     ("transformer_tiny", "multi30k", "'data/multi30k': one of local, multi30k_en_de")],
)  # fmt: skip
def test_a_misspelt_preset_is_one_line_naming_the_presets(monkeypatch, capsys, model, data, named):
    # bench_train.py --model transformer_smal used to end in Hydra's traceback.
    monkeypatch.setenv("RPR_NMT_DATA", "/nowhere")
    with pytest.raises(SystemExit) as exit:
        runner.load_config(model, 1000, data=data)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and named in err and "_schema" not in err


def test_missing_corpora_are_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("RPR_NMT_DATA", raising=False)
    monkeypatch.setattr(runner, "REPO", tmp_path / "repo")
    monkeypatch.setattr(runner, "Path", lambda p: tmp_path / "nowhere")
    with pytest.raises(SystemExit) as exit:
        runner.data_root()
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "set RPR_NMT_DATA" in err and err.count("\n") == 1
