"""Raw parallel text: line-aligned local files or a Hugging Face `datasets` corpus, in chunks.

Local corpora are `{root}/{split}.{lang}` or `{root}/{split}.{lang}.gz` (source=local), or the file
pairs data.files names under root (source=files, rpr_nmt.data.file_pairs), UTF-8, one segment per
line (read a block at a time by rpr_nmt.data.textfile). Hub splits are read in the dataset's own
batches and never turned into whole Python lists, so a split of any size passes through a bounded
amount of memory.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rpr_nmt.config import DataConfig
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.file_pairs import FilePair, file_pairs, training_pairs
from rpr_nmt.data.textfile import read_aligned, read_lines

__all__ = [
    "CHUNK_PAIRS", "TRAIN", "iter_parallel_text", "local_path", "read_lines", "read_parallel_text",
    "source_fingerprint",
]  # fmt: skip

TRAIN = "train"  # split name meaning "the concatenation of data_cfg.train_splits"
SOURCES = ("local", "hub", "files")  # the values of data.source
CHUNK_PAIRS = 50_000  # pairs per chunk: ~10 MB of text, ~70 MB while sentencepiece's ids are lists
Chunks = Iterator[tuple[list[str], list[str]]]


def local_path(root: str | Path, split: str, lang: str, *, hub_dataset: str = "") -> Path:
    """The file of one side of a local split: `{root}/{split}.{lang}`, else the same + `.gz`.

    Args:
        hub_dataset: data.hub_dataset; when set, the message offers data.source=hub as well (a
            corpus without one, such as data=local, has only data.root to mend).

    Raises:
        DataError: neither exists (or one is a folder); the message names both expected paths and
            how to point at the corpus.
    """
    plain = Path(root) / f"{split}.{lang}"
    for candidate in (plain, plain.with_name(plain.name + ".gz")):
        if candidate.is_file():
            return candidate
        if candidate.is_dir():
            raise DataError(
                f"{candidate} is a folder, not a file of one side of split '{split}' ({lang}): "
                f"put the {lang} text of '{split}' there, one segment per line"
            )
    raise DataError(
        f"missing data file for split '{split}' ({lang}): expected {plain} or {plain}.gz; "
        "set data.root to the folder holding the corpus"
        + (f", or use data.source=hub ({hub_dataset})" if hub_dataset else "")
    )


def _hub_split(cfg: DataConfig, split: str) -> str:
    hub_splits = cfg.hub_splits or {}
    if split not in hub_splits:
        raise DataError(
            f"split '{split}' has no entry in data.hub_splits ({dict(hub_splits)}); add e.g. "
            f"data.hub_splits.{split}=validation"
        )
    return hub_splits[split]


def _languages(feature: Any) -> list[str] | None:
    """The languages of a `translation` column: of its feature (Translation, or a struct read from
    data files), or of the first row of a streamed batch; None when it does not tell."""
    if getattr(feature, "languages", None) is not None:
        return list(feature.languages)
    if isinstance(feature, dict):
        return list(feature)
    if isinstance(feature, list) and feature and isinstance(feature[0], dict):
        return list(feature[0])
    return None


def _columns(features: Any, src_lang: str, tgt_lang: str, where: str) -> tuple[str, str] | None:
    """The schema of a hub split: None for a `translation` dict column, else the two columns."""
    names = list(features) if features is not None else []
    if "translation" in names:
        languages = _languages(features["translation"])
        if languages is not None and not {src_lang, tgt_lang} <= set(languages):
            raise DataError(
                f"{where}: the 'translation' column has languages {sorted(languages)}, not "
                f"'{src_lang}' and '{tgt_lang}': set data.src_lang and data.tgt_lang to two of "
                "them, or data.hub_config to a configuration of this pair"
            )
        return None
    if src_lang in names and tgt_lang in names:
        return src_lang, tgt_lang
    raise DataError(
        f"{where}: expected a 'translation' column or columns '{src_lang}' and '{tgt_lang}', "
        f"found {names}"
    )


def _load_hub(cfg: DataConfig, split: str) -> tuple[Any, str]:
    """(dataset or iterable dataset, description) of one hub split; DataError when unavailable."""
    import datasets  # deferred: importing datasets costs about a second

    name, config = cfg.hub_dataset, cfg.hub_config or None
    hub_split = _hub_split(cfg, split)
    where = f"hub dataset {name!r} (config {config}, split {hub_split})"
    try:
        return datasets.load_dataset(name, config, split=hub_split, streaming=cfg.streaming), where
    except Exception as e:  # noqa: BLE001 - network, missing dataset or split: all end the same way
        raise DataError(
            f"could not load {where}: {type(e).__name__}: {e}. Without access to the Hugging Face "
            "hub use data.source=local with data.root pointing at {split}.{lang}[.gz] files "
            "(HF_HUB_OFFLINE=1 reads only the local Hugging Face cache and fails at once instead "
            "of retrying)."
        ) from e


def _text(values: list[Any]) -> list[str]:
    """A column's segments, a missing one (null) as an empty line, as in a local file."""
    return [v if v is not None else "" for v in values]


def _streamed_chunks(ds: Any, cfg: DataConfig, where: str, limit: int | None, size: int) -> Chunks:
    """Chunks of an IterableDataset, read in its own batches of `size` rows."""
    batches = ds.iter(batch_size=size)
    first = next(batches, None)
    if first is None:
        return
    # Some streamed formats only reveal their columns in the first rows.
    columns = _columns(ds.features or first, cfg.src_lang, cfg.tgt_lang, where)
    left = limit
    for batch in itertools.chain([first], batches):
        if columns is None:
            rows = [r or {} for r in batch["translation"][:left]]
            src = _text([r.get(cfg.src_lang) for r in rows])
            tgt = _text([r.get(cfg.tgt_lang) for r in rows])
        else:
            src, tgt = _text(batch[columns[0]][:left]), _text(batch[columns[1]][:left])
        yield src, tgt
        if left is not None:
            left -= len(src)
            if left <= 0:
                return


def iter_hub_chunks(cfg: DataConfig, split: str, limit: int | None, size: int) -> Chunks:
    """Source and target lines of one hub split, in chunks of at most `size` pairs.

    Supports the WMT14 schema (a `translation` column of {lang: text}) and flat per-language columns
    (bentrevett/multi30k). `hub_dataset` may also be a local folder of data files, which
    load_dataset reads the same way. A downloaded split is read from its memory-mapped Arrow files
    batch by batch; with data.streaming only the rows up to `limit` are fetched.

    Args:
        cfg: the data config (hub_dataset, hub_config, hub_splits, streaming, src_lang, tgt_lang).
        split: our split name, mapped through hub_splits.
        limit: keep only the first `limit` pairs (None = all).
        size: pairs per chunk.

    Raises:
        DataError: the split is not mapped, the dataset cannot be loaded, or its columns do not fit.
    """
    import datasets

    ds, where = _load_hub(cfg, split)
    if isinstance(ds, datasets.IterableDataset):
        yield from _streamed_chunks(ds, cfg, where, limit, size)
        return
    columns = _columns(ds.features, cfg.src_lang, cfg.tgt_lang, where)
    if limit is not None and limit < len(ds):
        ds = ds.select(range(limit))
    if columns is None:
        ds = ds.flatten()  # translation.{lang} columns read straight from Arrow, no per-row dicts
        columns = (f"translation.{cfg.src_lang}", f"translation.{cfg.tgt_lang}")
    for batch in ds.select_columns(list(columns)).iter(batch_size=size):
        yield _text(batch[columns[0]]), _text(batch[columns[1]])


def _split_names(cfg: DataConfig, split: str) -> list[str]:
    return list(cfg.train_splits) if split == TRAIN else [split]


def _local_pairs(cfg: DataConfig, name: str, *, train: bool) -> list[FilePair]:
    """The file pairs of one split of a local corpus: {name}.{lang} under root (source=local),
    or data.files' pairs (source=files), those of a training split without its misaligned ones."""
    if cfg.source == "files":
        return training_pairs(cfg, name)[0] if train else file_pairs(cfg, name)
    src = local_path(cfg.root, name, cfg.src_lang, hub_dataset=cfg.hub_dataset)
    tgt = local_path(cfg.root, name, cfg.tgt_lang, hub_dataset=cfg.hub_dataset)
    return [FilePair(src, tgt, name)]


def iter_parallel_text(data_cfg: DataConfig, split: str, chunk_pairs: int = CHUNK_PAIRS) -> Chunks:
    """The raw, uncleaned, line-aligned text of a split in chunks of at most chunk_pairs pairs.

    Args:
        data_cfg: the data config, keys as in DataConfig.
        split: a split name; "train" means the concatenation of data_cfg.train_splits, in order,
            capped at max_train_pairs.
        chunk_pairs: pairs per chunk; the same settings and input always give the same chunks.

    Yields:
        (source lines, target lines), equally long and non-empty.

    Raises:
        DataError: missing, unreadable or misaligned input.
    """
    cfg, source = data_cfg, data_cfg.source
    if source not in SOURCES:
        raise DataError(f"data.source must be 'local', 'hub' or 'files', got {source!r}")
    limit = cfg.max_train_pairs if split == TRAIN else None
    done = 0
    for name in _split_names(cfg, split):
        if limit is not None and done >= limit and source == "hub":
            break  # local splits past the cap are still read to compare their sides' line counts
        if source == "hub":
            left = None if limit is None else limit - done
            for src, tgt in iter_hub_chunks(cfg, name, left, chunk_pairs):
                done += len(src)
                if src:
                    yield src, tgt
            continue
        for pair in _local_pairs(cfg, name, train=split == TRAIN):
            left = None if limit is None else max(limit - done, 0)
            chunks = read_aligned(
                pair.src, pair.tgt, split=name, chunk_pairs=chunk_pairs, limit=left
            )
            for src, tgt in chunks:
                done += len(src)
                if src:
                    yield src, tgt


def read_parallel_text(data_cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """The raw, uncleaned, line-aligned text of a split as two lists.

    For what is small or needed whole (references for BLEU, sources to translate); a training split
    of any size is read in bounded memory with iter_parallel_text.

    Returns:
        (source lines, target lines), equally long.

    Raises:
        DataError: missing, unreadable or misaligned input.
    """
    src: list[str] = []
    tgt: list[str] = []
    for s, t in iter_parallel_text(data_cfg, split):
        src += s
        tgt += t
    return src, tgt


def source_fingerprint(data_cfg: DataConfig, split: str) -> str:
    """A hash that changes whenever the raw text of a split may change, without decoding it.

    Local files are hashed byte for byte (cheap: the compressed bytes); with source=files, their
    names as data.files lists them too, so that another list prepares again. Hub splits are
    identified by dataset, configuration, hub split and cap, since hashing them would mean
    downloading or streaming them again.
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
        if data_cfg.source == "files":
            pairs = file_pairs(data_cfg, name)  # checked: two names per entry
            for (src_name, tgt_name), pair in zip(data_cfg.files[name], pairs):
                h.update(f"{name}:{src_name}|{tgt_name}|".encode())
                _hash_file(h, pair.src)
                _hash_file(h, pair.tgt)
            continue
        for lang in (data_cfg.src_lang, data_cfg.tgt_lang):
            path = local_path(data_cfg.root, name, lang, hub_dataset=data_cfg.hub_dataset)
            h.update(f"{name}.{lang}|".encode())
            _hash_file(h, path)
    return h.hexdigest()


def _hash_file(h: Any, path: Path) -> None:
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError as e:
        raise DataError(f"missing data file {path}") from e
