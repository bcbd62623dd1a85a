"""Settings and splits refused before training, in one line: a seed numpy cannot take, data
settings that pass their range checks as NaN or as a negative cap, and a valid or test split that
training or the evaluation at its end could not use; and a run tuned on the valid split
(train.evaluate_test=false), which decodes no test split until asked."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from rpr_nmt.config import DataConfig, TrainConfig
from rpr_nmt.data import DataError, EncodedCorpus, Ragged
from rpr_nmt.train import SettingsError, train
from rpr_nmt.train.setup import check_data_settings, check_settings
from rpr_nmt.train.training_data import check_evaluated_splits

from .conftest import compose_config


@pytest.mark.parametrize("seed", [-1, 2**32, 5_000_000_000])
def test_a_seed_numpy_cannot_take_is_refused_in_one_line(seed):
    with pytest.raises(SettingsError, match=rf"^train\.seed={seed} must be in \[0, 4294967295\]$"):
        check_settings(TrainConfig(seed=seed))
    check_settings(TrainConfig(seed=2**32 - 1))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            dict(max_length_ratio=math.nan),
            r"data\.max_length_ratio=nan is not a number",
        ),
        (dict(bpe_character_coverage=math.nan), r"data\.bpe_character_coverage=nan must be in"),
        (dict(bpe_character_coverage=math.inf), r"data\.bpe_character_coverage=inf must be in"),
        (dict(vocab_size=0), r"data\.vocab_size=0 must be positive"),
        (dict(max_train_pairs=-5), r"data\.max_train_pairs=-5 must be at least 1 \(null = all"),
        (dict(src_lang="en", tgt_lang="en"), r"data\.src_lang and data\.tgt_lang are both 'en'"),
        (dict(held_out_overlap="skip"), r"data\.held_out_overlap='skip' must be keep, drop or"),
    ],
)
def test_a_data_setting_that_would_mislead_is_refused_in_one_line(fields, message):
    with pytest.raises(SettingsError, match=f"^{message}") as error:
        check_data_settings(DataConfig(**fields))
    assert "\n" not in str(error.value)
    check_data_settings(DataConfig(max_train_pairs=1, max_length_ratio=math.inf))


def _corpus(n: int) -> EncodedCorpus:
    rows = Ragged.from_lists([[5, 6]] * n)
    return EncodedCorpus(rows, rows)


def _local(root: Path, evaluate_at_end: bool = True, evaluate_test: bool = True):
    from rpr_nmt.config import TrainJobConfig

    config = TrainJobConfig()
    config.data = DataConfig(root=str(root), src_lang="en", tgt_lang="de")
    config.train = TrainConfig(evaluate_at_end=evaluate_at_end, evaluate_test=evaluate_test)
    return config


def _write(root: Path, split: str, lines: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        (root / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def test_an_empty_valid_split_is_refused_naming_its_files(tmp_path):
    _write(tmp_path, "valid", [])
    with pytest.raises(DataError) as error:
        check_evaluated_splits(_local(tmp_path), {"train": _corpus(3), "valid": _corpus(0)})
    assert str(error.value) == (
        f"validation split 'valid' ({tmp_path}/valid.en and {tmp_path}/valid.de) has no pairs: "
        "set data.valid_split to a split with pairs"
    )


def test_a_test_split_that_is_empty_or_missing_is_refused_unless_not_evaluated(tmp_path):
    splits = {"train": _corpus(3), "valid": _corpus(2)}
    _write(tmp_path, "test", [])
    way_out = "set data.test_split to a readable split with pairs, or train.evaluate_at_end=false"
    with pytest.raises(DataError, match=r"^test split 'test' \(.*test\.en and .*\) has no pairs"):
        check_evaluated_splits(_local(tmp_path), splits)
    (tmp_path / "test.de").unlink()
    with pytest.raises(DataError, match=r"^test split 'test': missing data file .*test\.de") as e:
        check_evaluated_splits(_local(tmp_path), splits)
    assert str(e.value).endswith(way_out) and "\n" not in str(e.value)
    assert check_evaluated_splits(_local(tmp_path, evaluate_at_end=False), splits) is None
    assert check_evaluated_splits(_local(tmp_path, evaluate_test=False), splits) is None
    _write(tmp_path, "test", ["a", "b"])
    assert check_evaluated_splits(_local(tmp_path), splits) == ["a", "b"]


def test_the_trainer_refuses_an_empty_valid_split_before_training(corpus, cache_dir, tmp_path):
    root = tmp_path / "corpus"
    shutil.copytree(corpus, root)
    for lang in ("en", "de"):
        (root / f"valid.{lang}").write_text("", encoding="utf-8")
    config = compose_config(root, cache_dir, "train.max_steps=4")
    with pytest.raises(DataError, match=r"^validation split 'valid' .* has no pairs"):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_an_empty_split_of_named_files_is_named_by_its_files():
    # source=files: the message named {split}.{lang} files that a preset of named pairs never reads.
    from rpr_nmt.train.training_data import _where

    data = DataConfig(source="files", root="/corpus", files={"valid": [["a.en.gz", "a.de.gz"]]})
    assert _where(data, "valid") == "a.en.gz and a.de.gz under /corpus"


def test_a_run_tuned_on_valid_decodes_no_test_until_asked(corpus, cache_dir, tmp_path):
    run, common = tmp_path / "run", ("train.max_steps=2", "train.valid_bleu=false")
    tuned = train(compose_config(corpus, cache_dir, *common, "train.evaluate_test=false"), run)
    assert "valid_bleu" in tuned and not any(key.startswith("test_") for key in tuned)
    assert (run / "eval_valid.json").is_file() and not (run / "eval_test.json").exists()
    assert tuned["evaluated_setup"]["test"] is False
    rerun = train(compose_config(corpus, cache_dir, *common, "train.evaluate_test=false"), run)
    assert rerun == tuned  # the summary kept: nothing decoded again
    chosen = train(compose_config(corpus, cache_dir, *common), run)  # the test set, once
    assert chosen["steps"] == 2 and chosen["valid_bleu"] == tuned["valid_bleu"]
    assert (run / "eval_test.json").is_file() and "test_bleu" in chosen
    assert "test" not in chosen["evaluated_setup"]  # as every run that scores its test set
