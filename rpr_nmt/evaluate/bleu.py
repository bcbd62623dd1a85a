"""Corpus scores: sacreBLEU on detokenised text (primary), chrF, TER, and paper-style tokenized
BLEU, against one reference per sentence or several (sacrebleu's multi-reference scoring).

sacreBLEU: the standard 13a tokenizer (sacrebleu's default for Latin-script targets; for zh, ja
and ko its recommended tokenizer, chosen from the target language as `sacrebleu -l src-tgt`
would), mixed case, exponential smoothing: exactly `sacrebleu REF -i HYP`, signature included.
Another of sacrebleu's tokenizers (tokenize="intl", "char", ...): `sacrebleu REF -i HYP -tok X`.

Tokenized BLEU, for comparison with Vaswani-era En-De tables (the paper does not say how it
computed BLEU; tensor2tensor's get_ende_bleu.sh ran Moses tokenizer.perl, split hyphenated
compounds with `s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`, then multi-bleu.perl):
- Tokenizer: sacrebleu's 13a (mteval-v13a punctuation splitting), not Moses, which is not a
  dependency. For German and French they differ mainly in that Moses escapes & < > ' " as HTML
  entities (the same on both sides, so BLEU barely moves) and splits French elisions ("l'homme"
  -> "l' homme"), which 13a keeps together. Neither splits hyphens inside words.
- Compound splitting: the same regular expression, with its quirk: matches do not overlap, so
  "a-b-c" becomes "a ##AT##-##AT## b-c", as in the original script.
- BLEU on the result with tokenize='none' (sacrebleu's BLEU equals multi-bleu.perl's except that
  exponential smoothing keeps it non-zero when a higher-order n-gram count is zero).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

_COMPOUND = re.compile(r"(\S)-(\S)")
_TOKENIZE_13A = Tokenizer13a()
# sacrebleu's tokenizers that need no download (spm, flores*: a model fetched on first use)
_LOCAL_TOKENIZERS = ("13a", "intl", "char", "zh", "ja-mecab", "ko-mecab", "none")


@dataclass(frozen=True)
class Scores:
    """Corpus-level scores of a set of hypotheses against one or more references each."""

    bleu: float  # sacreBLEU on detokenised text
    signature: str  # its sacreBLEU signature, e.g. nrefs:1|case:mixed|eff:no|tok:13a|...
    chrf: float  # chrF2 (sacrebleu defaults)
    chrf_signature: str
    ter: float  # translation edit rate (sacrebleu defaults), lower is better
    ter_signature: str
    tokenized_bleu: float  # BLEU on 13a-tokenized, compound-split text (paper-comparable)
    tokenized_signature: str  # how tokenized_bleu was computed
    sentences: int  # number of hypothesis / reference pairs


def compound_split(text: str) -> str:
    """Split hyphenated compounds as tensor2tensor's get_ende_bleu.sh: a-b -> a ##AT##-##AT## b."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


def paper_tokenize(text: str) -> str:
    """13a-tokenize, then split hyphenated compounds (the input of the tokenized BLEU)."""
    return compound_split(_TOKENIZE_13A(text.strip()))


def sacrebleu_bleu(tgt_lang: str, tokenize: str | None = None) -> BLEU:
    """sacrebleu's BLEU with the given tokenizer; None = its choice for tgt_lang (13a, zh, ...).

    Raises:
        ValueError: sacrebleu does not know `tokenize` or cannot load it here (a missing extra).
    """
    try:
        return BLEU(trg_lang=tgt_lang, tokenize=tokenize)
    except Exception as e:  # an unknown name, a missing extra, an spm model it cannot fetch
        choices = ", ".join(t for t in _LOCAL_TOKENIZERS if _loads(t))
        lines = str(e).strip().splitlines()
        why = "not one of its tokenizers" if isinstance(e, KeyError) else (lines or [repr(e)])[0]
        raise ValueError(
            f"bleu_tokenize={tokenize}: sacrebleu cannot use it here ({why}); choose one of "
            f"{choices}"
        ) from e


def _loads(tokenize: str) -> bool:
    try:
        BLEU(tokenize=tokenize)
    except Exception:
        return False
    return True


def tokenized_bleu(hyps: Sequence[str], streams: Sequence[Sequence[str]]) -> tuple[float, str]:
    """BLEU on 13a-tokenized, compound-split text against each reference set in `streams`
    (score_corpus's `tokenized_bleu`), and its signature: how it was computed."""
    bleu = BLEU(tokenize="none", force=True)
    score = bleu.corpus_score(
        [paper_tokenize(h) for h in hyps], [[paper_tokenize(r) for r in s] for s in streams]
    )
    return float(score.score), f"13a+compound-split(##AT##)|{bleu.get_signature().format()}"


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], tgt_lang: str) -> float:
    """sacreBLEU alone (score_corpus's `bleu`, without chrF, TER and tokenized BLEU)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references: not line-aligned")
    return float(BLEU(trg_lang=tgt_lang).corpus_score(list(hyps), [list(refs)]).score)


def score_corpus(
    hyps: Sequence[str],
    refs: Sequence[str],
    tgt_lang: str,
    *,
    extra_refs: Sequence[Sequence[str]] = (),
    tokenize: str | None = None,
) -> Scores:
    """sacreBLEU, chrF, TER (each with its signature) and tokenized compound-split BLEU.

    With extra_refs, every metric is sacrebleu's multi-reference score against refs and each
    further reference set (the signatures then say nrefs:2, ...).

    Args:
        hyps: detokenised hypotheses, one per reference.
        refs: raw references.
        tgt_lang: target language code; picks sacreBLEU's tokenizer (13a except for zh, ja, ko).
        extra_refs: further reference sets, each line-aligned with refs.
        tokenize: sacreBLEU's tokenizer ("intl", "char", "none", ...); None = chosen by tgt_lang.

    Returns:
        The scores and their signatures.

    Raises:
        ValueError: hyps and a reference set differ in length, or sacrebleu cannot use tokenize.
    """
    streams = [list(refs)] + [list(r) for r in extra_refs]
    for number, stream in enumerate(streams, start=1):
        if len(hyps) != len(stream):
            raise ValueError(
                f"{len(hyps)} hypotheses for {len(stream)} references (reference set {number}): "
                "they must be line-aligned"
            )
    hyps = list(hyps)
    bleu = sacrebleu_bleu(tgt_lang, tokenize)
    bleu_score = bleu.corpus_score(hyps, streams)
    chrf = CHRF()
    chrf_score = chrf.corpus_score(hyps, streams)
    ter = TER()
    ter_score = ter.corpus_score(hyps, streams)
    tok_bleu, tok_signature = tokenized_bleu(hyps, streams)
    return Scores(
        bleu=float(bleu_score.score),
        signature=bleu.get_signature().format(),
        chrf=float(chrf_score.score),
        chrf_signature=chrf.get_signature().format(),
        ter=float(ter_score.score),
        ter_signature=ter.get_signature().format(),
        tokenized_bleu=tok_bleu,
        tokenized_signature=tok_signature,
        sentences=len(hyps),
    )
