"""rpr-nmt-translate: translate raw sentences, one per line, with a checkpoint.

    echo "A man rides a bike." | rpr-nmt-translate checkpoint=runs/train/default/checkpoints/last.pt
    rpr-nmt-translate checkpoint=model.pt input=news.en output=news.de decode.nbest=4

With decode.nbest > 1 each output line is `i ||| translation ||| score` (i counts input lines from
0, score is the length-normalised log-probability), best first. A blank input line is not decoded:
it gives a blank line (with nbest > 1, one `i |||  ||| 0.0000` line). Errors print one line on
stderr and exit with status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import hydra
from omegaconf import DictConfig

from rpr_nmt.cli.common import (
    UsageError,
    checked_decode_config,
    checkpoints_of,
    exit_on_error,
    job_config,
    use_ema,
)
from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.config import TranslateJobConfig

PROG = "rpr-nmt-translate"


def read_input(path: str) -> list[str]:
    """Lines of a UTF-8 file, or of stdin for "-", without their line endings."""
    if path == "-":
        return sys.stdin.read().splitlines()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError as e:
        raise UsageError(f"cannot read input={path}: {e.strerror}") from e


def format_output(nbest: Sequence[Sequence[tuple[str, float]]], n: int) -> list[str]:
    """One translation per line, or `i ||| text ||| score` lines when n > 1."""
    if n == 1:
        return [hyps[0][0] if hyps else "" for hyps in nbest]
    return [
        f"{i} ||| {text} ||| {score:.4f}" for i, hyps in enumerate(nbest) for text, score in hyps
    ]


def run(job: TranslateJobConfig) -> None:
    """Read, translate, write."""
    from rpr_nmt.checkpoint import load_for_inference
    from rpr_nmt.decode import translate
    from rpr_nmt.model import resolve_device

    paths, decode = checkpoints_of(job.checkpoint), checked_decode_config(job.decode)
    sentences = read_input(job.input)
    device = resolve_device(decode.device)
    model, tokenizer, _ = load_for_inference(paths, device, use_ema=use_ema(job.weights))
    results = translate(model, tokenizer, sentences, decode)
    texts = [
        [(" ".join(tokenizer.decode(h.tokens).splitlines()), h.score) for h in hyps]
        for hyps in results
    ]
    text = "".join(line + "\n" for line in format_output(texts, decode.nbest))
    if job.output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(job.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write output={job.output}: {e.strerror}") from e


@hydra.main(config_path=CONFIG_DIR, config_name="translate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Translate cfg.input (or stdin) into cfg.output (or stdout)."""
    exit_on_error(PROG, lambda: run(job_config(cfg)))


if __name__ == "__main__":
    main()
