"""The pairs rpr-nmt trains and evaluates on, written as gzipped text for another toolkit.

    .venv/bin/python scripts/export_pairs.py OUT_DIR [data=wmt_news_en_de] [data.KEY=VALUE ...]
        [--as SPLIT=NAME ...]

So that a peer (OpenNMT-py's prepare.sh reads SRC_DIR/{split}.{lang}.gz and trains its own BPE)
trains on exactly the pairs rpr-nmt trains on. The data group of the train config is composed with
the overrides given, as rpr-nmt-train composes it, and written under OUT_DIR, one line per segment:

    train     the training pairs after rpr-nmt's text filters (rpr_nmt.data.train_text.TrainText:
              data.max_train_pairs, empty or whitespace-only sides, data.held_out_overlap,
              data.deduplicate), in the order rpr-nmt reads them
    valid     data.valid_split as it is read (read_parallel_text), unfiltered
    test      data.test_split, likewise

as {name}.{src_lang}.gz and {name}.{tgt_lang}.gz, the name being the config's split name ("train"
for the training pairs) unless `--as valid=val` renames it (SPLIT is train, valid or test, or the
config's name of the valid or test split). The length filters (data.max_tokens_per_sentence,
data.max_length_ratio, data.max_train_source_tokens) are NOT applied: they count tokens of
rpr-nmt's own BPE model, which the peer does not use, so the peer applies its own.

It prints one line per written split with its pair count, and how many training pairs the text
filters removed. Bad input (an override, an unknown split in --as, an OUT_DIR that is a file, a
missing or misaligned corpus file) is one line on stderr and exit status 2, with nothing written:
everything is checked first, and each file is written under a temporary name in OUT_DIR and
renamed only once every file is complete.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.cli.override_errors import override_problem
from rpr_nmt.config import DataConfig, TrainJobConfig
from rpr_nmt.data.cache import owned_temporary
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.file_pairs import check_files
from rpr_nmt.data.sources import CHUNK_PAIRS, TRAIN, local_path, read_parallel_text
from rpr_nmt.data.train_text import TrainText

PROG = "export_pairs"
ROLES = ("train", "valid", "test")  # the splits written, as --as names them


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="folder for {name}.{lang}.gz (created)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. data=wmt_news_en_de")
    parser.add_argument(
        "--as", dest="renames", action="append", default=[], metavar="SPLIT=NAME",
        help="write split SPLIT (train, valid or test) as NAME.{lang}.gz, e.g. valid=val",
    )  # fmt: skip
    return parser.parse_intermixed_args(argv)


def compose_data(overrides: Sequence[str]) -> DataConfig:
    """The data group of the train config with the overrides, as rpr-nmt-train composes it.

    Raises:
        DataError: an override that cannot work, in one line.
    """
    if problem := override_problem(TrainJobConfig, [PROG, *overrides]):
        raise DataError(problem)
    try:
        with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
            return to_job_config(compose("train", overrides=list(overrides))).data
    except (HydraException, OmegaConfBaseException) as e:
        raise DataError(f"the overrides {' '.join(overrides)} do not compose: {e}") from e


def output_names(cfg: DataConfig, renames: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Role (train, valid, test) -> (split read, file name stem), after the --as renames.

    A valid and a test split that are the same split under the same name are written once.

    Raises:
        DataError: a rename that is not SPLIT=NAME with a known SPLIT and a plain file name, or two
            different splits that would be written to the same files.
    """
    splits = {"train": TRAIN, "valid": cfg.valid_split, "test": cfg.test_split}
    names = dict(splits)
    for text in renames:
        key, _, name = text.partition("=")
        role = key if key in ROLES else next((r for r in ROLES[1:] if splits[r] == key), None)
        if role is None:
            raise DataError(
                f"--as {text}: unknown split {key!r}: name train, valid or test (here valid is "
                f"split '{cfg.valid_split}', test is split '{cfg.test_split}')"
            )
        if not name or name in (".", "..") or "/" in name or os.sep in name:
            raise DataError(f"--as {text}: NAME must be a file name stem, e.g. {key}=val")
        names[role] = name
    out: dict[str, tuple[str, str]] = {}
    for role in ROLES:
        taken = next((r for r, (_, n) in out.items() if n == names[role]), None)
        if taken is not None and out[taken][0] == splits[role]:
            continue  # the same split under the same name: written once
        if taken is not None:
            raise DataError(
                f"{taken} and {role} would both be written as {names[role]}.{{lang}}.gz: rename "
                f"one with --as {role}=NAME"
            )
        out[role] = (splits[role], names[role])
    return out


def check_corpus(cfg: DataConfig) -> list[str]:
    """Refuse a missing corpus file before anything is read; the notes on training file pairs
    left out for differing in line count (source=files), as rpr-nmt-train logs them."""
    if cfg.source == "files":
        return check_files(cfg)
    if cfg.source == "local":
        for split in [*cfg.train_splits, cfg.valid_split, cfg.test_split]:
            for lang in (cfg.src_lang, cfg.tgt_lang):
                local_path(cfg.root, split, lang, hub_dataset=cfg.hub_dataset)
    return []


class Outputs:
    """Gzipped text files written under temporary names in one folder, renamed by commit().

    Args:
        folder: where the files go; created (and removed again by discard) when missing.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.created = not folder.exists()
        self.pending: list[tuple[Path, Path]] = []  # (temporary, final)
        self.carriage_returns = 0  # lines holding "\r": universal-newline readers split them

    def open(self, name: str) -> BinaryIO:
        """A gzip stream to folder/name (written as a hidden temporary file until commit)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = owned_temporary(self.folder / name)  # hidden, with the usual file mode
        self.pending.append((Path(tmp), self.folder / name))
        # mtime=0 and the final name in the header: the same pairs give the same bytes.
        raw = os.fdopen(fd, "wb")
        return gzip.GzipFile(filename=name.removesuffix(".gz"), mode="wb", fileobj=raw, mtime=0)

    def write(self, stream: BinaryIO, lines: Sequence[str]) -> None:
        if lines:
            text = "\n".join(lines) + "\n"
            self.carriage_returns += sum("\r" in line for line in lines) if "\r" in text else 0
            stream.write(text.encode("utf-8"))

    def commit(self) -> None:
        for tmp, final in self.pending:
            tmp.replace(final)
        self.pending = []

    def discard(self) -> None:
        for tmp, _ in self.pending:
            tmp.unlink(missing_ok=True)
        self.pending = []
        if self.created and self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()


def close(*streams: BinaryIO) -> None:
    for stream in streams:
        fileobj = stream.fileobj  # type: ignore[attr-defined]
        stream.close()
        fileobj.close()


def export(cfg: DataConfig, names: dict[str, tuple[str, str]], out: Outputs) -> list[str]:
    """Write every split under temporary names; returns the summary lines.

    Raises:
        DataError: unreadable or misaligned input, or no training pair left by the text filters.
    """
    langs = (cfg.src_lang, cfg.tgt_lang)
    held_out = {r: read_parallel_text(cfg, s) for r, (s, _) in names.items() if r != "train"}
    lines = []
    for role, (split, name) in names.items():
        if role == "train":
            continue
        streams = [out.open(f"{name}.{lang}.gz") for lang in langs]
        for stream, side in zip(streams, held_out[role]):
            out.write(stream, side)
        close(*streams)
        lines.append(f"{role}: {len(held_out[role][0])} pairs of split '{split}' -> {name}.*.gz")
    name = names["train"][1]
    streams = [out.open(f"{name}.{lang}.gz") for lang in langs]
    with TrainText(cfg, out.folder, CHUNK_PAIRS) as text:
        for src, tgt in text.chunks():
            out.write(streams[0], src)
            out.write(streams[1], tgt)
        report = text.report
    close(*streams)
    lines.insert(0, f"train: {report.kept} pairs of {', '.join(cfg.train_splits)} -> {name}.*.gz")
    lines += [
        f"text filters removed {report.read - report.kept} of the {report.read} training pairs "
        f"read (max_train_pairs={cfg.max_train_pairs}): {report.empty} with an empty or "
        "whitespace-only side, "
        f"{report.overlap} sharing a sentence with the valid or test split "
        f"(held_out_overlap={cfg.held_out_overlap}), {report.duplicates} duplicates "
        f"(deduplicate={cfg.deduplicate})",
        "length filters NOT applied (they count rpr-nmt's BPE tokens): "
        f"max_tokens_per_sentence={cfg.max_tokens_per_sentence}, "
        f"max_length_ratio={cfg.max_length_ratio}, "
        f"max_train_source_tokens={cfg.max_train_source_tokens}",
    ]
    if out.carriage_returns:
        lines.append(
            f"note: {out.carriage_returns} lines hold a carriage return (\\r), which a reader in "
            "universal-newline mode (Python's open) splits in two"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = Outputs(args.out_dir)
    try:
        if args.out_dir.exists() and not args.out_dir.is_dir():
            raise DataError(f"OUT_DIR {args.out_dir} is a file: name a folder (created if missing)")
        cfg = compose_data(args.overrides)
        names = output_names(cfg, args.renames)
        notes = check_corpus(cfg)
        summary = export(cfg, names, out)
        out.commit()
    except (DataError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    finally:
        out.discard()  # the temporary files of an unfinished export; nothing after commit
    for line in [*notes, *summary]:
        print(line)
    print(f"written to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
