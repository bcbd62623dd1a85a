"""Paths on the command line that Hydra's override grammar would misread, quoted before it runs.

A sweep names each run's folder after its overrides, so the paths users pass most often hold '='
and ',': runs/sweeps/ablate_k_multi30k_en_de/model.max_relative_position=16,train.seed=1,
train=cpu_short/checkpoints/last.pt. Unquoted, Hydra reads `checkpoint=<that path>` as a broken
override ("mismatched input '='") and splits a list item at its commas. The inference commands
(rpr-nmt-evaluate, -translate, -score) call quote_path_overrides on their arguments first:

    checkpoint=runs/x/a=1,b=2/last.pt        ->  checkpoint='runs/x/a=1,b=2/last.pt'
    ensemble=[runs/x/a=1,b=2,runs/x/a=1,b=3]  ->  ensemble=['runs/x/a=1,b=2','runs/x/a=1,b=3']

A list is cut into items so that each is the longest text between commas that names an existing
file or folder (a piece naming none is an item by itself). A value (or list item) that names an
existing path is quoted, with Hydra's escapes, wherever Hydra would not read it whole as written:
non-ASCII letters, quotes, brackets, braces, '#', ';', '=', ',', '${'. Any other value is quoted
when it holds '='. What is already quoted, holds a quote, a backslash or '$' (Hydra's escapes and
interpolation) without naming a path, or needs no quoting is passed on unchanged.

A path to read names something that exists, so only its existence tells a path from a value meant
for Hydra (a sweep a,b, a list, null). A path to write (translate's output=, the run folder
hydra.run.dir of evaluate and score: `output_keys`) often does not exist yet, and takes only a
name: its value is quoted by the same rule whether it exists or not, so that output=out,v2.txt or
output=ausgabe-ü.txt is written as named, as a shell redirect would. Under -m (--multirun) commas
in it are a sweep, and it is read as a path to read.

    output=out,v2.txt   ->  output='out,v2.txt'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from rpr_nmt.config import override_key

# A value holding one of these is left to Hydra as written (its escapes, interpolation).
_LEAVE = ("'", '"', "\\", "$")


def quote_path_overrides(
    argv: Sequence[str], keys: Iterable[str], output_keys: Iterable[str] = ()
) -> list[str]:
    """argv with the values of `keys` (key=value or key=[a,b], paths to read) and `output_keys`
    (key=value, one path to write, which need not exist) quoted where Hydra would misread them;
    argv[0] and every other argument unchanged."""
    multirun = "-m" in argv or "--multirun" in argv
    outputs = set() if multirun else set(output_keys)
    keys = set(keys) | set(output_keys)
    out = list(argv[:1])
    for arg in argv[1:]:
        key, sep, value = arg.partition("=")
        name = override_key(arg)
        if sep and name in outputs:
            arg = f"{key}={_quoted_output(value)}"
        elif sep and name in keys:
            arg = f"{key}={_quoted(value)}"
        out.append(arg)
    return out


def _quoted_output(value: str) -> str:
    """A path to write as Hydra should read it: quoted wherever Hydra would not read it whole,
    existing or not, unless quoted by hand or holding Hydra's escapes or interpolation."""
    if _read_whole(value) or (_holds_escapes(value) and not Path(value).exists()):
        return value
    return _hydra_quoted(value)


def _quoted(value: str) -> str:
    """The value as Hydra should read it: a list's items or the scalar quoted where needed."""
    if value.startswith("[") and value.endswith("]"):
        items = _list_items(value[1:-1])
        if not any(_needs_quotes(item) for item in items):
            return value
        if _holds_escapes(value) and not all(Path(item).exists() for item in items):
            return value  # quoted by hand, or Hydra's escapes: as written
        return "[" + ",".join(_hydra_quoted(item) for item in items) + "]"
    if Path(value).exists():
        return value if _read_whole(value) else _hydra_quoted(value)
    if "=" in value and not _holds_escapes(value):
        return _hydra_quoted(value)
    return value


def _holds_escapes(value: str) -> bool:
    return any(c in value for c in _LEAVE)


@cache
def _parser() -> OverridesParser:
    return OverridesParser.create()


def _read_whole(value: str, in_list: bool = False) -> bool:
    """Whether Hydra reads `key=value` (`key=[value]`: in_list) as the string `value` itself."""
    if "${" in value:  # an interpolation to OmegaConf
        return False
    try:
        override = _parser().parse_override(f"key=[{value}]" if in_list else f"key={value}")
    except HydraException:
        return False
    expected = [value] if in_list else value
    return not override.is_sweep_override() and override.value() == expected


def _hydra_quoted(text: str) -> str:
    """`text` in single quotes as Hydra's grammar reads it back: backslashes before a quote or
    at the end doubled, quotes escaped, and '${' escaped so that OmegaConf does not resolve it."""
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    text = text.replace("'", "\\'").replace("${", "\\${")
    return f"'{text}'"


def _list_items(inner: str) -> list[str]:
    """The items of a list written without quotes: from each comma on, the longest run of pieces
    that names an existing path is one item; a piece that starts none is an item by itself (as
    Hydra would cut it, so that the error names it)."""
    pieces = inner.split(",")
    items: list[str] = []
    start = 0
    while start < len(pieces):
        end = start + 1  # one piece, unless more of them name an existing path
        for stop in range(len(pieces), start, -1):
            joined = ",".join(pieces[start:stop]).strip()
            if joined and Path(joined).exists():
                end = stop
                break
        items.append(",".join(pieces[start:end]).strip())
        start = end
    return items


def _needs_quotes(item: str) -> bool:
    return "=" in item or "," in item or (Path(item).exists() and not _read_whole(item, True))
