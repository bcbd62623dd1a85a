"""Reading text files: a byte order mark is not text."""

from __future__ import annotations

import gzip
import io

import pytest

from rpr_nmt.cli.translate import read_lines as translate_lines
from rpr_nmt.config import DataConfig
from rpr_nmt.data import DataError, read_parallel_text
from rpr_nmt.data.textfile import read_lines

BOM = "\ufeff"


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_byte_order_mark_opening_a_reference_file_is_not_in_its_first_line(tmp_path, suffix):
    # Issue 31: the BOM stayed in the first reference (and cost its first word in BLEU).
    def write(name: str, text: str) -> None:
        data = text.encode("utf-8")
        path = tmp_path / (name + suffix)
        path.write_bytes(gzip.compress(data) if suffix else data)

    write("test.en", f"{BOM}a man.\nthe dog.\n")
    write("test.de", f"{BOM}ein mann.\nder{BOM} hund.\r\n")
    cfg = DataConfig(root=str(tmp_path), src_lang="en", tgt_lang="de", test_split="test")
    assert read_parallel_text(cfg, "test") == (
        ["a man.", "the dog."],
        ["ein mann.", f"der{BOM} hund."],  # inside a line, U+FEFF is a character like any other
    )


def test_byte_offsets_count_the_byte_order_mark(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"\xef\xbb\xbfok\nno \xff\n")
    with pytest.raises(DataError, match=r"line 2 \(byte 9: "):
        read_lines(tmp_path / "bad.txt")


def test_translate_input_drops_a_byte_order_mark():
    stream = io.BytesIO(b"\xef\xbb\xbfa man.\nthe dog.\n")
    assert list(translate_lines(stream, "stdin")) == ["a man.", "the dog."]
