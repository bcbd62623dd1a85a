"""source=files: each split is a list of named (source file, target file) pairs under data.root.

A corpus assembled from files that follow no one naming scheme (the WMT test sets:
`news-test2008.en`, `newstest2019.de-en.de`, `newstest2021.en-de.refA.de`, ...) names them in
the config (configs/data/wmt_news_en_de.yaml), each pair [source file, target file]:

    files:
      train:
        - [newstest2012.en.gz, newstest2012.de.gz]
        - [newstest2021.en-de.en.gz, newstest2021.en-de.refA.de.gz]
      valid:
        - [newstest2013.en.gz, newstest2013.de.gz]

Only the named files are read, so a file added to the folder changes nothing, and a set with several
references is read with the one its pair names. A split's pairs are read in order and concatenated.
Within the training splits a pair whose two files differ in line count is left out (counted and
logged by prepare_data); in any other split it is refused, as a misaligned split of source=local is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rpr_nmt.config import DataConfig
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.textfile import LineReader


@dataclass(frozen=True)
class FilePair:
    """One entry of data.files: a source file and the target file line-aligned with it."""

    src: Path
    tgt: Path
    split: str  # the data.files key it is listed under

    @property
    def name(self) -> str:
        """`src / tgt` as the config names them, for messages."""
        return f"{self.src.name} / {self.tgt.name}"


def file_pairs(cfg: DataConfig, split: str) -> list[FilePair]:
    """The file pairs of one split of data.files, as paths under data.root.

    Raises:
        DataError: the split has no entry in data.files, or an entry is not two file names.
    """
    files = cfg.files or {}
    if split not in files:
        raise DataError(
            f"split '{split}' has no entry in data.files (it lists {sorted(files)}): add e.g. "
            f"data.files.{split}=[[SOURCE_FILE,TARGET_FILE]], names under data.root"
        )
    pairs = []
    for entry in files[split]:
        if len(entry) != 2 or not all(entry):
            raise DataError(
                f"data.files.{split} has the entry {list(entry)}: each entry is two file names, "
                f"[{cfg.src_lang} file, {cfg.tgt_lang} file]"
            )
        pairs.append(FilePair(Path(cfg.root) / entry[0], Path(cfg.root) / entry[1], split))
    return pairs


def check_files_exist(cfg: DataConfig) -> None:
    """Refuse, before anything is read or written, a file of data.files that is not there.

    Raises:
        DataError: one line naming the first missing file (or a folder in its place) and its entry.
    """
    for split in cfg.files or {}:
        for pair in file_pairs(cfg, split):
            for path in (pair.src, pair.tgt):
                if not path.is_file():
                    what = "is a folder, not a file" if path.is_dir() else "is not there"
                    raise DataError(
                        f"missing data file {path}: data.files.{split} names it but it {what}; "
                        f"set data.root to the folder holding it (data={cfg.name})"
                    )


def count_lines(path: Path) -> int:
    """Lines of a UTF-8 text file (plain or .gz), counted in its bytes, as read_aligned counts."""
    with LineReader(path) as reader:
        return reader.count_all()


@dataclass(frozen=True)
class Misaligned:
    """A training file pair left out: its two files differ in line count."""

    pair: FilePair
    src_lines: int
    tgt_lines: int

    def describe(self) -> str:
        return (
            f"left out {self.pair.name} of data.files.{self.pair.split}: {self.src_lines} and "
            f"{self.tgt_lines} lines, not line-aligned"
        )


def check_files(cfg: DataConfig) -> list[str]:
    """Refuse a missing file (check_files_exist); the training file pairs left out for differing in
    line count, each described in one line for the log."""
    check_files_exist(cfg)
    return [m.describe() for split in cfg.train_splits for m in training_pairs(cfg, split)[1]]


def training_pairs(cfg: DataConfig, split: str) -> tuple[list[FilePair], list[Misaligned]]:
    """The file pairs of a training split that are read, and those left out as misaligned.

    Counting reads each file once more (its bytes, not decoded text): cheap for the news-sized
    files this source is for.
    """
    kept, left_out = [], []
    for pair in file_pairs(cfg, split):
        n_src, n_tgt = count_lines(pair.src), count_lines(pair.tgt)
        if n_src == n_tgt:
            kept.append(pair)
        else:
            left_out.append(Misaligned(pair, n_src, n_tgt))
    return kept, left_out
