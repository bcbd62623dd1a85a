"""Raw parallel text: line-aligned local files or a Hugging Face `datasets` corpus.

Local corpora are `{root}/{split}.{lang}` or `{root}/{split}.{lang}.gz`, UTF-8, one segment per
line. Lines are split on "\\n" only (never str.splitlines, which also splits on form feeds and
U+2028 and would misalign a pair).
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
from pathlib import Path
from typing import Any

from rpr_nmt.config import DataConfig
from rpr_nmt.data.errors import DataError

TRAIN = "train"  # split name meaning "the concatenation of data_cfg.train_splits"


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file, gzip-compressed when its name ends in .gz.

    Args:
        path: the file.

    Returns:
        The lines without their line endings ("\\n" or "\\r\\n").

    Raises:
        DataError: the file is missing or not valid UTF-8 (the message gives the line number).
    """
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise DataError(f"missing file: {path}") from e
    except (OSError, EOFError) as e:
        raise DataError(f"cannot read {path}: {e}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}: invalid UTF-8 on line {line} "
            f"(byte {e.start}: {data[e.start : e.start + 4]!r}); "
            "re-encode the file as UTF-8"
        ) from e
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def local_path(root: str | Path, split: str, lang: str) -> Path:
    """The file of one side of a local split: `{root}/{split}.{lang}`, else the same + `.gz`.

    Raises:
        DataError: neither exists; the message names both expected paths and how to point at the
            corpus.
    """
    plain = Path(root) / f"{split}.{lang}"
    for candidate in (plain, plain.with_name(plain.name + ".gz")):
        if candidate.is_file():
            return candidate
    raise DataError(
        f"missing data file for split '{split}' ({lang}): expected {plain} or {plain}.gz. "
        "Set RPR_NMT_DATA or data.root to the folder holding the corpus, or use data.source=hub."
    )


def read_local_pair(
    root: str | Path, split: str, src_lang: str, tgt_lang: str
) -> tuple[list[str], list[str]]:
    """Source and target lines of one local split, checked to be line-aligned.

    Raises:
        DataError: a file is missing or unreadable, or the two files differ in line count.
    """
    src_path, tgt_path = local_path(root, split, src_lang), local_path(root, split, tgt_lang)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"split '{split}' is not line-aligned: {src_path} has {len(src)} lines but "
            f"{tgt_path} has "
            f"{len(tgt)}; fix the files so that line i of one translates line i of the other"
        )
    return src, tgt


def _hub_split(cfg: DataConfig, split: str) -> str:
    hub_splits = cfg.hub_splits or {}
    if split not in hub_splits:
        raise DataError(
            f"split '{split}' has no entry in data.hub_splits ({dict(hub_splits)}); add e.g. "
            f"data.hub_splits.{split}=validation"
        )
    return hub_splits[split]


def _columns(features: Any, src_lang: str, tgt_lang: str, where: str) -> tuple[str, str] | None:
    """The schema of a hub split: None for a `translation` dict column, else the two columns."""
    names = list(features) if features is not None else []
    if "translation" in names:
        return None
    if src_lang in names and tgt_lang in names:
        return src_lang, tgt_lang
    raise DataError(
        f"{where}: expected a 'translation' column or columns '{src_lang}' and '{tgt_lang}', "
        f"found {names}"
    )


def read_hub_pair(
    cfg: DataConfig, split: str, limit: int | None = None
) -> tuple[list[str], list[str]]:
    """Source and target lines of one split loaded with `datasets.load_dataset`.

    Supports the WMT14 schema (a `translation` column of {lang: text}) and flat per-language columns
    (bentrevett/multi30k). `hub_dataset` may also be a local folder of data files, which
    load_dataset reads the same way.

    Args:
        cfg: the data config (hub_dataset, hub_config, hub_splits, streaming, src_lang, tgt_lang).
        split: our split name, mapped through hub_splits.
        limit: keep only the first `limit` pairs (None = all); with streaming only these are
            fetched.

    Raises:
        DataError: the split is not mapped, the dataset cannot be loaded, or its columns do not fit.
    """
    import datasets  # deferred: importing datasets costs about a second

    src_lang, tgt_lang = cfg.src_lang, cfg.tgt_lang
    name, config = cfg.hub_dataset, cfg.hub_config or None
    hub_split = _hub_split(cfg, split)
    where = f"hub dataset {name!r} (config {config}, split {hub_split})"
    try:
        ds = datasets.load_dataset(name, config, split=hub_split, streaming=cfg.streaming)
    except Exception as e:  # noqa: BLE001 - network, missing dataset or split: all end the same way
        raise DataError(
            f"could not load {where}: {type(e).__name__}: {e}. Without access to the Hugging Face "
            "hub use data.source=local with data.root pointing at {split}.{lang}[.gz] files "
            "(HF_HUB_OFFLINE=1 reads only the local Hugging Face cache and fails at once instead "
            "of retrying)."
        ) from e
    if isinstance(ds, datasets.IterableDataset):
        rows = iter(ds)
        features = ds.features
        if features is None:  # some streamed formats only reveal their columns in the first row
            first = next(rows, None)
            features = {} if first is None else first
            rows = itertools.chain([] if first is None else [first], rows)
        columns = _columns(features, src_lang, tgt_lang, where)
        rows = itertools.islice(rows, limit)
        if columns is None:
            pairs = [(r["translation"][src_lang], r["translation"][tgt_lang]) for r in rows]
        else:
            pairs = [(r[columns[0]], r[columns[1]]) for r in rows]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    columns = _columns(ds.features, src_lang, tgt_lang, where)
    if limit is not None and limit < len(ds):
        ds = ds.select(range(limit))
    if columns is None:
        ds = ds.flatten()  # translation.{lang} columns read straight from Arrow, no per-row dicts
        columns = (f"translation.{src_lang}", f"translation.{tgt_lang}")
    return list(ds[columns[0]]), list(ds[columns[1]])


def _split_names(cfg: DataConfig, split: str) -> list[str]:
    return list(cfg.train_splits) if split == TRAIN else [split]


def read_parallel_text(data_cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """The raw, uncleaned, line-aligned text of a split (references for BLEU, sources to translate).

    Args:
        data_cfg: the data config, keys as in DataConfig.
        split: a split name; "train" means the concatenation of data_cfg.train_splits, in order,
            capped at max_train_pairs.

    Returns:
        (source lines, target lines), equally long.

    Raises:
        DataError: missing, unreadable or misaligned input.
    """
    source = data_cfg.source
    if source not in ("local", "hub"):
        raise DataError(f"data.source must be 'local' or 'hub', got {source!r}")
    limit = data_cfg.max_train_pairs if split == TRAIN else None
    src: list[str] = []
    tgt: list[str] = []
    for name in _split_names(data_cfg, split):
        if limit is not None and len(src) >= limit:
            break
        if source == "hub":
            left = None if limit is None else limit - len(src)
            s, t = read_hub_pair(data_cfg, name, left)
        else:
            s, t = read_local_pair(data_cfg.root, name, data_cfg.src_lang, data_cfg.tgt_lang)
        src += s
        tgt += t
    if limit is not None:
        del src[limit:], tgt[limit:]
    return src, tgt


def source_fingerprint(data_cfg: DataConfig, split: str) -> str:
    """A hash that changes whenever the raw text of a split may change, without decoding it.

    Local files are hashed byte for byte (cheap: the compressed bytes). Hub splits are identified by
    dataset, configuration, hub split and cap, since hashing them would mean downloading or
    streaming them again.
    """
    h = hashlib.sha256()
    h.update(f"{data_cfg.source}|{data_cfg.src_lang}|{data_cfg.tgt_lang}|".encode())
    if split == TRAIN:
        h.update(f"max_train_pairs={data_cfg.max_train_pairs}|".encode())
    for name in _split_names(data_cfg, split):
        if data_cfg.source == "hub":
            hub = (data_cfg.hub_dataset, data_cfg.hub_config, _hub_split(data_cfg, name))
            h.update(repr(hub).encode())
            continue
        for lang in (data_cfg.src_lang, data_cfg.tgt_lang):
            path = local_path(data_cfg.root, name, lang)
            h.update(f"{name}.{lang}|".encode())
            with open(path, "rb") as f:
                for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()
