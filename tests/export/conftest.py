"""A tiny head-shared model trained for a few seconds on a synthetic En-De word mapping, its BPE
model and checkpoint: enough for outputs of varying length that end with EOS."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.config import DataConfig, ModelConfig, TrainJobConfig
from rpr_nmt.data import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.model import Transformer, build_model
from tests.word_corpus import corpus

TINY = ModelConfig(
    d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0,
    attention_dropout=0.0, max_relative_position=4, share_relative_across_heads=True,
    pre_norm=True,
)  # fmt: skip


def padded(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out  # (B, L)


def train_tiny(cfg: ModelConfig, tok: Tokenizer, steps: int = 120, seed: int = 0) -> Transformer:
    """A model fitted for `steps` Adam updates (a few seconds on one core), in eval mode."""
    torch.manual_seed(seed)
    model = build_model(cfg, vocab_size=tok.vocab_size, pad_id=PAD_ID)
    src, tgt = corpus(512, seed=seed + 1)
    src_ids = [tok.encode(s) + [EOS_ID] for s in src]
    tgt_ids = [tok.encode(t) for t in tgt]
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        batch = range((step * 32) % 512, (step * 32) % 512 + 32)
        logits = model(
            padded([src_ids[i] for i in batch]), padded([[BOS_ID] + tgt_ids[i] for i in batch])
        )  # (B, T, V)
        gold = padded([tgt_ids[i] + [EOS_ID] for i in batch])  # (B, T)
        loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.fixture(scope="session")
def tiny_bpe() -> Tokenizer:
    src, tgt = corpus(300, seed=5)
    return Tokenizer(train_bpe(src + tgt, vocab_size=80, character_coverage=1.0))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tiny_bpe) -> Path:
    """A checkpoint of the trained tiny model, with its data folder (valid split) beside it."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("tiny")
    data = root / "data"
    data.mkdir()
    src, tgt = corpus(20, seed=9)
    (data / "valid.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (data / "valid.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    model = train_tiny(TINY, tiny_bpe)
    data_cfg = DataConfig(name="tiny", root=str(data), vocab_size=80)
    config = TrainJobConfig(data=data_cfg, model=TINY)
    state = TrainingState(
        config=config, model=model.state_dict(), bpe_model=tiny_bpe.proto, step=120
    )
    return save_checkpoint(state, root / "tiny.pt")


def tiny_config(**overrides) -> ModelConfig:
    """TINY with some fields changed."""
    return replace(TINY, **overrides)


def readme_translations(folder: Path, text: list[str]) -> list[str]:
    """The lines of docs/deployment.md, greedy: the exported folder alone, no rpr_nmt."""
    import ctranslate2
    import sentencepiece as spm

    translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=1)
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.model"))
    with open(folder / "rpr_nmt_export.json") as f:
        rows = json.load(f)["position_limits"]["decoder"]  # a learned decoder table's rows, or None
    results = translator.translate_batch(
        sp.encode(text, out_type=str), beam_size=1, max_input_length=0,
        max_decoding_length=256 if rows is None else min(256, rows - 1),
        suppress_sequences=[["<pad>"], ["<s>"]],
    )  # fmt: skip
    return [sp.decode(r.hypotheses[0]) for r in results]
