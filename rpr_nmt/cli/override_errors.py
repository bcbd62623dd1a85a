"""Command-line overrides Hydra would refuse with several lines and exit status 1 (or, for a key
added with `+`, accept and then ignore), refused before Hydra runs in one line, exit status 2:
a group option that does not exist, a key no schema has, a value of the wrong type, a schema key
deleted with `~`, an unquoted `~` inside a value, a group set to null (a traceback), a sweep
without -m, and --cfg with -m (a traceback). Anything else is left to Hydra."""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Override
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.config import override_key


def refuse_bad_overrides(prog: str, schema: type, argv: Sequence[str] | None = None) -> None:
    """Exit with status 2 and one line when an override of argv (sys.argv) cannot work."""
    if problem := override_problem(schema, sys.argv if argv is None else argv):
        print(f"{prog}: error: {problem}", file=sys.stderr)
        sys.exit(2)


def override_problem(schema: type, argv: Sequence[str]) -> str | None:
    """The first override of argv that cannot work with the primary config `schema`, in one line
    naming it and what to write instead; None when there is none (or argv names another config)."""
    try:
        args, _ = get_args_parser().parse_known_args(list(argv[1:]))
    except SystemExit:
        return None  # Hydra's own flags, as Hydra reports them
    if args.config_name or args.config_path or args.config_dir:
        return None
    if args.multirun and args.cfg:
        return (
            f"--cfg {args.cfg} with -m: Hydra prints one config, not a sweep's jobs: leave out -m "
            "(a sweep's values are its hydra.sweeper.params, shown by --cfg hydra)"
        )
    parser = OverridesParser.create()
    for text in args.overrides:
        if override_key(text).split(".")[0].split("/")[0] == "hydra":
            continue
        try:
            (override,) = parser.parse_overrides([text])
        except HydraException:
            if "~" in text.partition("=")[2]:
                key, _, value = text.partition("=")
                return (
                    f"{text}: an unquoted ~ in a value is not Hydra's grammar: quote the value, "
                    f"\"{key}='{value}'\" (~ stands for your home folder)"
                )
            continue  # Hydra names the syntax error
        if problem := _problem(schema, override, text):
            return problem
        if override.is_sweep_override() and not args.multirun:
            return _sweep_problem(override, text, printing=bool(args.cfg))
    return None


def _sweep_problem(override: Override, text: str, printing: bool) -> str:
    """A sweep's values given without -m, which Hydra refuses as ambiguous."""
    if printing:
        return f"{text}: --cfg prints one job's config: give {override.key_or_group} one value"
    return f"{text}: several values are a sweep: add -m to run one job each"


def _problem(schema: type, override: Override, text: str) -> str | None:
    key = override.key_or_group
    if override.package is not None or "/" in key:
        return None
    if "." not in key and (Path(CONFIG_DIR) / key).is_dir():
        return _option_problem(key, override, text)
    owner, name, prefix = _owner(schema, key)
    if owner is None:
        return None  # a key under a field of no schema (a dict)
    names = [f.name for f in dataclasses.fields(owner)]
    if name not in names:
        if override.is_delete():
            return None
        close = difflib.get_close_matches(name, names, n=1)
        dotted = f"{prefix}." if prefix else ""
        hint = f"did you mean {dotted}{close[0]}?" if close else f"settings: {', '.join(names)}"
        return f"{text}: {key.lstrip('+~')}: not a setting of this command ({hint})"
    if override.is_delete():
        return f"{text}: a setting cannot be deleted: give it a value instead ({key}=...)"
    values = _values(override)
    if values is None:
        return None
    node = OmegaConf.structured(owner)
    for value in values:
        if isinstance(value, str) and "${" in value:
            continue
        try:
            setattr(node, name, value)
        except OmegaConfBaseException:
            wanted = _type_name(owner, name)
            example = f"{key}={_example(owner, name)}"
            return f"{text}: {key} takes {wanted}, not {value!r}: write e.g. {example}"
    return None


def _option_problem(group: str, override: Override, text: str) -> str | None:
    """A group choice (`positions=rel`) that names no file of configs/<group>/."""
    values = _values(override)
    options = sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))
    for value in values or []:
        if value is None:
            hint = f"write {group}=none; " if "none" in options else ""
            return (
                f"{text}: {group} takes an option, not null ({hint}options: {', '.join(options)})"
            )
        if isinstance(value, str) and value not in options:
            close = difflib.get_close_matches(value, options, n=1)
            hint = f"did you mean {group}={close[0]}? " if close else ""
            return f"{text}: no {group} option {value!r} ({hint}options: {', '.join(options)})"
    return None


def _owner(schema: type, key: str) -> tuple[type | None, str, str]:
    """The dataclass that should hold a dotted key's next part, that part and the key up to it:
    the last part, or the first that no field names; no dataclass under a field of another type."""
    parts = key.split(".")
    owner: Any = schema
    for number, part in enumerate(parts[:-1]):
        if part not in {f.name for f in dataclasses.fields(owner)}:
            return owner, part, ".".join(parts[:number])
        owner = _dataclass_of(typing.get_type_hints(owner)[part])
        if owner is None:
            return None, part, ""
    return owner, parts[-1], ".".join(parts[:-1])


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass a field's type names, itself or in `X | None`; None for any other type."""
    if dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        found = [arg for arg in typing.get_args(hint) if dataclasses.is_dataclass(arg)]
        return found[0] if found else None
    return None


def _values(override: Override) -> list[Any] | None:
    """The values an override sets: one, or each of a choice sweep; None for other sweeps."""
    if not override.is_sweep_override():
        return [override.value()]
    value = override.value()
    return list(value.list) if isinstance(value, ChoiceSweep) else None


def _type_name(owner: type, name: str) -> str:
    hint = typing.get_type_hints(owner)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    names = {int: "a whole number", float: "a number", bool: "true or false", str: "text"}
    text = " or ".join(names.get(a, getattr(a, "__name__", str(a))) for a in args)
    return text + (" or null" if type(None) in typing.get_args(hint) else "")


def _example(owner: type, name: str) -> str:
    default = OmegaConf.to_container(OmegaConf.structured(owner))[name]
    if default is None or isinstance(default, bool):
        return str(default).lower().replace("none", "null")
    return str(default)
