"""rpr-nmt-translate: translate raw sentences, one per line, with a checkpoint.

    echo "A man rides a bike." | rpr-nmt-translate checkpoint=runs/train/default/checkpoints/last.pt
    rpr-nmt-translate checkpoint=model.pt input=news.en output=news.de decode.nbest=4
    rpr-nmt-translate 'ensemble=[seed1/last.pt,seed2/last.pt,runs/seed3]' input=news.en

With decode.nbest > 1 each output line is `i ||| translation ||| score` (i counts input lines from
0, score is the length-normalised log-probability), best first. A blank input line (or one of
no BPE token: zero-width or control characters only) is not decoded: it gives a blank line
(with nbest > 1, one `i |||  ||| 0.0000` line). Lines end at "\\n" alone (a form feed or U+2028
inside a line stays in it). Translations are written a window of lines at
a time, in input order, so memory does not grow with the input. output=FILE is written as
FILE.partial and renamed over FILE at the end: a run that fails leaves FILE as it was, and the
translations it made in FILE.partial (a symbolic link FILE is written through, to its target).
Errors print one line on stderr and exit with status 2; on a line that is not UTF-8, the
translations of the lines before it are written first. Ctrl-C stops with one line saying how
many lines were translated, exit status 130. A line longer than max_input_tokens BPE tokens
(default 1024) stops the run with its number, as a bad line does; so does a line longer than a
learned position table (positions=learned, model.max_positions).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import hydra
from omegaconf import DictConfig

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.cli.common import (
    InterruptError,
    UsageError,
    bracket_ensemble,
    checked_decode_config,
    checkpoints_of,
    exit_on_error,
    job_config,
    load_model,
)
from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.cli.override_errors import refuse_bad_overrides
from rpr_nmt.cli.path_overrides import quote_path_overrides
from rpr_nmt.config import DecodeConfig, TranslateJobConfig
from rpr_nmt.data import DataError
from rpr_nmt.data.textfile import BOM

PROG = "rpr-nmt-translate"
# The settings that take paths to read, and those that take a path to write (which need not
# exist yet), quoted for Hydra where it would misread them (path_overrides.py).
PATH_KEYS = ("checkpoint", "ensemble", "input")
OUTPUT_KEYS = ("output",)
# Lines translated (and held) at a time: this many batches of decode.max_sentences. Enough for
# length-sorted batches to pad little; memory stays flat however long the input.
WINDOW_BATCHES = 16
# Bytes of an input line read per BPE token of max_input_tokens: generous (a piece is at most 16
# characters of at most 4 bytes), so that a line is refused by its token count, while a line
# without end (a file without newlines, input=/dev/zero) is refused before it fills memory.
BYTES_PER_TOKEN = 64


def open_input(path: str) -> BinaryIO:
    """The input as bytes: stdin for "-", else the file (UsageError if it cannot be read)."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as e:
        raise UsageError(f"cannot read input={path}: {e.strerror}") from e


class Output:
    """Where the translations go: stdout for "-", else output=FILE, written as FILE.partial and
    renamed over FILE once every line is translated. A run that fails or is stopped leaves FILE
    as it was (abandon); the translations written so far stay in FILE.partial. A device or a pipe
    (output=/dev/null) is written directly. A symbolic link is written through, as a shell
    redirect would: the partial file sits beside its target and is renamed over the target, so
    the link stays a link.

    Opened before any work, so that a bad path fails at once (UsageError).
    """

    def __init__(self, path: str, input_path: str) -> None:
        self.path = path
        self.partial: Path | None = None  # the file written until the end, for output=FILE
        self.lines_done = 0  # input lines whose translations are written
        self.target = Path(path)  # the file renamed over at the end: a link's target
        if path == "-":
            self.stream: TextIO = sys.stdout
            return
        if self.target.is_symlink():  # renaming over the link would make it a regular file
            try:
                self.target = self.target.resolve()
            except RuntimeError as e:  # Python < 3.13 raises this for a loop of links
                raise UsageError(f"output={path} is a loop of symbolic links: point it at a "
                                 "file, or remove it") from e  # fmt: skip
        target = self.target
        if input_path != "-" and target.resolve() == Path(input_path).resolve():
            raise UsageError(f"output={path} is the input file: choose another output")
        if target.is_dir():
            raise UsageError(f"output={path} is a folder: name the file to write")
        written = target
        if not target.exists() or target.is_file():
            self.partial = written = target.with_name(target.name + ".partial")
            if input_path != "-" and written.resolve() == Path(input_path).resolve():
                raise UsageError(f"input={input_path} is where output={path} is written first: "
                                 "choose another output")  # fmt: skip
        try:
            self.stream = open(written, "w", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write output={path}: {e.strerror}") from e

    def write(self, lines: Sequence[str], inputs: int) -> None:
        """Write the translation lines of the next `inputs` input lines, flushed."""
        text = "".join(f"{line}\n" for line in lines)
        self.lines_done += inputs  # first: unbuffered, the text is out before write() returns
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError as e:
            raise UsageError(f"cannot write output={self.path}: {e.strerror}") from e

    def finish(self) -> None:
        """Every line is translated: FILE.partial becomes FILE (keeping FILE's mode if it
        existed)."""
        if self.stream is sys.stdout:
            return
        self.stream.close()
        if self.partial is not None:
            try:
                if self.target.exists():
                    shutil.copymode(self.target, self.partial)
                os.replace(self.partial, self.target)
            except OSError as e:
                raise UsageError(f"cannot write output={self.path}: {e.strerror}; the "
                                 f"translations are in {self.partial}") from e  # fmt: skip

    def abandon(self) -> str:
        """Close without touching FILE; FILE.partial is kept when it holds translations, else
        removed. Returns what to add to the error: where the translations so far are ("" when
        there are none, or they went to stdout or a device)."""
        if self.stream is sys.stdout:
            return ""
        self.stream.close()
        if self.partial is None:
            return ""
        if self.lines_done == 0:
            self.partial.unlink(missing_ok=True)
            return ""
        return (f"; output={self.path} is unchanged, the translations of the "
                f"{self.lines_done} lines before are in {self.partial}")  # fmt: skip


def read_lines(stream: BinaryIO, name: str, max_bytes: int | None = None) -> Iterator[str]:
    """The input's lines, one at a time, split on "\\n" only (not str.splitlines, which also
    splits on form feed, NEL and U+2028 inside a line), one trailing "\\r" removed, and a byte
    order mark opening the input dropped. At most `max_bytes` of a line are read (None: any).
    The first line with a "\\r" inside (a file with CR line ends) is warned about on stderr.

    Raises:
        UsageError: a line is not valid UTF-8, or longer than `max_bytes` (raised when that line
            is reached, so that the lines before it can be translated first); it names the line.
    """
    offset, warned = 0, False
    size = -1 if max_bytes is None else max_bytes + 1  # one byte more: its newline, or too long
    for number, raw in enumerate(iter(lambda: stream.readline(size), b""), start=1):
        if not warned and b"\r" in raw.rstrip(b"\r\n"):  # old Mac line ends: one long line
            warned = True
            print(f"{PROG}: warning: {name} line {number} holds carriage returns (\\r) but lines "
                  "end at \\n only, so it is translated as one line; for CR line ends, convert "
                  "the input first: tr '\\r' '\\n'", file=sys.stderr)  # fmt: skip
        if max_bytes is not None and len(raw) > max_bytes and not raw.endswith(b"\n"):
            raise UsageError(
                f"{name} line {number} is longer than {max_bytes} bytes, more than "
                f"max_input_tokens={max_bytes // BYTES_PER_TOKEN} BPE tokens can hold; the "
                f"{number - 1} lines before it are translated; split the line, or raise "
                "max_input_tokens"
            )
        if number == 1 and raw.startswith(BOM):  # a byte order mark is not text
            raw, offset = raw[len(BOM) :], len(BOM)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = raw[e.start : e.start + 1]
            raise UsageError(
                f"{name}: invalid UTF-8 on line {number} (byte offset {offset + e.start}: "
                f"{bad!r}); the {number - 1} lines before it are translated; re-encode the input "
                "as UTF-8"
            ) from e
        offset += len(raw)
        line = line[:-1] if line.endswith("\n") else line
        yield line[:-1] if line.endswith("\r") else line


def within_limit(lines: Iterator[str], tokenizer: Any, max_tokens: int, name: str) -> Iterator[str]:
    """The lines, each checked to encode to at most `max_tokens` BPE tokens (EOS not counted).

    Raises:
        UsageError: a longer line, when it is reached (the lines before it are translated).
    """
    for number, line in enumerate(lines, start=1):
        if line.strip() and (n := len(tokenizer.encode(line))) > max_tokens:
            raise UsageError(
                f"{name} line {number} has {n} BPE tokens, more than max_input_tokens="
                f"{max_tokens}; the {number - 1} lines before it are translated; split the "
                "line, or raise max_input_tokens"
            )
        yield line


def windows(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    """The lines in lists of `size` (the last one shorter); when reading fails, the lines read
    before the failure come out first, then the error is raised."""
    window: list[str] = []
    try:
        for line in lines:
            window.append(line)
            if len(window) == size:
                yield window
                window = []
    except UsageError:
        if window:
            yield window
        raise
    if window:
        yield window


def format_output(
    nbest: Sequence[Sequence[tuple[str, float]]], n: int, first: int = 0
) -> list[str]:
    """One translation per line, or `i ||| text ||| score` lines when n > 1 (i counts from
    `first`, the input line of nbest[0], counted from 0)."""
    if n == 1:
        return [hyps[0][0] if hyps else "" for hyps in nbest]
    return [
        f"{i} ||| {text} ||| {score:.4f}"
        for i, hyps in enumerate(nbest, start=first)
        for text, score in hyps
    ]


def run(job: TranslateJobConfig) -> None:
    """Translate the input a window of lines at a time, each window written in input order
    before the next is read; output=FILE is replaced only once every line is translated."""
    decode = checked_decode_config(job.decode)
    if job.max_input_tokens < 1:
        raise UsageError(f"max_input_tokens={job.max_input_tokens}: give at least 1, e.g. 1024")
    for member in job.ensemble or [job.checkpoint]:  # a missing file fails before input is read
        checkpoints_of(member)
    with ExitStack() as files:
        source = open_input(job.input)
        if source is not sys.stdin.buffer:
            files.callback(source.close)
        out = Output(job.output, job.input)
        try:
            translate_lines(job, decode, source, out)
        except KeyboardInterrupt as e:
            kept = out.abandon() or "; their translations are written"
            raise InterruptError(
                f"interrupted (Ctrl-C) after {out.lines_done} input lines{kept}"
            ) from e
        except BaseException as e:
            kept = out.abandon()
            if kept and isinstance(e, (UsageError, CheckpointError, DataError)):
                e.args = (f"{e}{kept}",)  # still one line
            elif kept:
                print(f"{PROG}: {kept.removeprefix('; ')}", file=sys.stderr)
            raise
        out.finish()


def translate_lines(
    job: TranslateJobConfig, decode: DecodeConfig, source: BinaryIO, out: Output
) -> None:
    """Load the model, then translate and write the source a window at a time."""
    from rpr_nmt.decode import decoding_model, translate
    from rpr_nmt.decode.constraints import PositionLimitError
    from rpr_nmt.model import resolve_device

    device = resolve_device(decode.device)
    loaded = load_model(job, device)
    model, tokenizer = loaded.model, loaded.tokenizer
    model = decoding_model(model.eval(), decode.precision)  # cast once, not per window
    window_cfg = replace(decode, precision="fp32")  # the model is at its precision already
    name = "stdin" if job.input == "-" else f"input={job.input}"
    limit = job.max_input_tokens
    lines = read_lines(source, name, max_bytes=limit * BYTES_PER_TOKEN)
    lines = within_limit(lines, tokenizer, limit, name)
    for window in windows(lines, WINDOW_BATCHES * decode.max_sentences):
        try:
            results = translate(model, tokenizer, window, window_cfg, first_line=out.lines_done + 1)
        except PositionLimitError as e:  # the lines before it first, as for a bad line
            assert e.line is not None  # translate() numbers its lines
            fits = window[: e.line - 1 - out.lines_done]
            if fits:
                write_translations(translate(model, tokenizer, fits, window_cfg), tokenizer,
                                   decode.nbest, out)  # fmt: skip
            raise UsageError(f"{name} {e}; the {e.line - 1} lines before it are translated") from e
        write_translations(results, tokenizer, decode.nbest, out)


def write_translations(results: Sequence[Any], tokenizer: Any, nbest: int, out: Output) -> None:
    """The n-best lists of the next input lines, detokenised, written in input order."""
    texts = [
        [(" ".join(tokenizer.decode(h.tokens).splitlines()), h.score) for h in hyps]
        for hyps in results
    ]
    out.write(format_output(texts, nbest, first=out.lines_done), len(results))


@hydra.main(config_path=CONFIG_DIR, config_name="translate", version_base="1.3")
def translate(cfg: DictConfig) -> None:
    """Translate cfg.input (or stdin) into cfg.output (or stdout)."""
    exit_on_error(PROG, lambda: run(job_config(cfg)))


def main() -> None:
    """rpr-nmt-translate from the command line, its paths quoted for Hydra first."""
    sys.argv = quote_path_overrides(bracket_ensemble(sys.argv), PATH_KEYS, OUTPUT_KEYS)
    refuse_bad_overrides(PROG, TranslateJobConfig)
    translate()


if __name__ == "__main__":
    main()
