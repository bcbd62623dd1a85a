"""scripts/length_profile.py: which clipping distances can matter on a corpus."""

from __future__ import annotations

import gzip

import pytest
import sentencepiece as spm

from ..conftest import load_script

profile = load_script("length_profile")


TEXT = ["a b c d e f g h", "a b", "c d e"] * 40


def train_bpe(tmp_path) -> list[str]:
    """A 20-piece BPE model, tmp_path / bpe.model, trained on TEXT; returns TEXT."""
    (tmp_path / "train.txt").write_text("\n".join(TEXT) + "\n")
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "train.txt"), model_prefix=str(tmp_path / "bpe"), vocab_size=20,
        model_type="bpe", character_coverage=1.0,
    )  # fmt: skip
    return TEXT


def test_a_sentence_clips_at_k_only_when_it_has_a_distance_beyond_k():
    p = profile.length_profile([2, 5, 6, 6], ks=[1, 4, 5])
    # n tokens have distances up to n - 1: beyond 1 for n >= 3, beyond 4 for n = 6, beyond 5 never.
    assert p.clipped == {1: 0.75, 4: 0.5, 5: 0.0}
    assert (p.sentences, p.longest, p.median) == (4, 6, 5.5)
    assert p.largest_k_that_clips == 4
    with pytest.raises(ValueError, match="empty"):
        profile.length_profile([], ks=[4])


def test_the_script_reads_gzip_text_and_names_a_missing_file(tmp_path, capsys):
    text = train_bpe(tmp_path)
    with gzip.open(tmp_path / "train.en.gz", "wt") as f:
        f.write("\n".join(text) + "\n")
    args = ["--bpe", str(tmp_path / "bpe.model"), "--k", "2,64"]
    assert profile.main([*args, str(tmp_path / "train.en.gz")]) == 0
    out = capsys.readouterr().out
    assert "| train.en.gz | 120 |" in out and "0.00% |" in out
    assert profile.main([*args, str(tmp_path / "nowhere.en")]) == 1
    assert "nowhere.en" in capsys.readouterr().err


def test_files_of_one_name_from_two_folders_each_keep_their_row(tmp_path, capsys):
    # Two corpora's train.en.gz used to share one row: the second silently replaced the first.
    text = train_bpe(tmp_path)
    for folder, lines in (("one", text), ("two", text[:3])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.en").write_text("\n".join(lines) + "\n")
    files = [str(tmp_path / "one" / "train.en"), str(tmp_path / "two" / "train.en")]
    assert profile.main(["--bpe", str(tmp_path / "bpe.model"), *files]) == 0
    out = capsys.readouterr().out
    assert f"| {files[0]} | 120 |" in out and f"| {files[1]} | 3 |" in out


@pytest.mark.parametrize(
    ("args", "named"), [(["--k", "-1"], "--k '-1'"), (["--bpe", "__file__"], "not a sentencepiece")]
)
def test_a_negative_k_or_a_file_that_is_no_model_is_one_line(tmp_path, capsys, args, named):
    (tmp_path / "a.en").write_text("a b\n")
    args = [str(tmp_path / "a.en") if a == "__file__" else a for a in args]
    base = ["--bpe", str(tmp_path / "a.en")] if "--bpe" not in args else []
    with pytest.raises(SystemExit) as exit:
        profile.main([*base, *args, str(tmp_path / "a.en")])
    assert exit.value.code == 2 and named in capsys.readouterr().err
