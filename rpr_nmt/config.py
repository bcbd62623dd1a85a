"""Typed configuration schemas: one dataclass per config group, plain Python.

Values live in configs/*.yaml; these classes fix the names, types and defaults. The command-line
entry points register them with Hydra (rpr_nmt/cli/config_store.py), so that a mistyped key or a
value of the wrong type fails when the config composes, and hand the composed config to the
library as these dataclasses (OmegaConf.to_object): a YAML field leads to every use by name.

    DataConfig    configs/data/     corpus, cleaning, BPE, cache
    ModelConfig   configs/model/    size and position representation (build_model's arguments)
    TrainConfig   configs/train/    optimiser, schedule, batching, checkpoints, time limit
    DecodeConfig  configs/decode/   beam search for validation, evaluation and translation

TrainJobConfig, EvaluateJobConfig, TranslateJobConfig and ScoreJobConfig are the primary configs
of rpr-nmt-train, rpr-nmt-evaluate, rpr-nmt-translate and rpr-nmt-score; the last three share the
model's fields (ModelChoiceConfig) and evaluate and score the split's (SplitChoiceConfig). This
module imports neither Hydra nor OmegaConf: model, data and training code depend on it without
depending on the command line. A checkpoint stores a TrainJobConfig as plain data
(dataclasses.asdict); job_config_from_dict reads it back.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from rpr_nmt.buckets import DEFAULT_BOUNDS

# OmegaConf reads this string as "a value the user must give" (omegaconf.MISSING).
MISSING = "???"
# The YAML files the command-line entry points compose (configs/ at the repository's top level).
CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "configs")
# Config resolvers whose value depends on the host that resolves them (configs/train/demo.yaml's
# ${if_native_bf16:A,B}): a run's record holds the value its host chose (rpr_nmt.cli.run_folder).
HOST_CHOSEN = ("if_native_bf16",)


def host_chosen(value: object) -> bool:
    """Whether a config value, unresolved, is one of HOST_CHOSEN's interpolations."""
    return isinstance(value, str) and any(f"${{{name}:" in value for name in HOST_CHOSEN)


@dataclass
class DataConfig:
    name: str = "local"  # corpus name, used in run folders and caches, e.g. multi30k_en_de
    # "hub" (Hugging Face datasets), "local" ({split}.{lang} files under root) or "files" (the
    # file pairs under root that `files` names)
    source: str = "local"
    root: str = "data/local"  # folder of the corpus files for source=local and source=files
    # source=files: split -> its [source file, target file] pairs under root, read in order
    files: dict[str, list[list[str]]] = field(default_factory=dict)
    src_lang: str = "en"  # source language code, e.g. en
    tgt_lang: str = "de"  # target language code, e.g. de
    train_splits: list[str] = field(default_factory=lambda: ["train"])  # concatenated
    valid_split: str = "valid"  # split used for validation loss and BLEU during training
    test_split: str = "test"  # split evaluated at the end of training
    hub_dataset: str = ""  # Hugging Face dataset for source=hub, e.g. wmt14
    hub_config: str = ""  # its configuration, e.g. de-en
    hub_splits: dict[str, str] = field(default_factory=dict)  # split -> hub split name
    streaming: bool = False  # stream the hub's train split (WMT14 En-Fr)
    max_train_pairs: int | None = None  # keep only the first N training pairs; null = all
    vocab_size: int = 8000  # joint sentencepiece BPE vocabulary: 8000 for Multi30k, 32768 for WMT
    bpe_sample_sentences: int = 2_000_000  # sentences sampled to train BPE on large corpora
    bpe_character_coverage: float = 1.0  # sentencepiece character_coverage, 1.0 for Latin scripts
    encode_threads: int = 0  # sentencepiece threads encoding the splits; 0 = every usable core
    max_tokens_per_sentence: int = 256  # drop longer training pairs (BPE tokens)
    max_train_source_tokens: int | None = None  # length studies: shorter sources only; null = all
    max_length_ratio: float = 3.0  # drop pairs with longer/shorter side above this
    deduplicate: bool = False  # drop repeated (source, target) training pairs
    # training pairs with a side equal to a sentence of valid_split or test_split: "keep" (not
    # checked), "drop" (removed and counted) or "refuse" (a DataError naming the first)
    held_out_overlap: str = "keep"
    cache_dir: str = "data/cache"  # BPE models, encoded corpora (YAML: $RPR_NMT_CACHE)

    def __post_init__(self) -> None:
        # A `~` the shell left unexpanded ('data.root=~/corpus', RPR_NMT_CACHE='~/x') is the home
        # folder, not a folder named `~`; no cache key holds these paths.
        self.root = os.path.expanduser(self.root)
        self.cache_dir = os.path.expanduser(self.cache_dir)


POSITION_STACKS = ("both", "encoder", "decoder")  # ModelConfig.positions_in
# ModelConfig's fields that choose the position methods and where they act: a position study's
# settings differ in these alone (rpr_nmt.report.rows.recipe_keys).
POSITION_FIELDS = (
    "max_relative_position", "relative_keys", "relative_values", "sinusoidal",
    "share_relative_across_heads", "share_relative_across_layers", "absolute_positions",
    "max_positions", "relative_positions", "rope_base", "rope_dims", "rope_layout",
    "t5_num_buckets", "t5_max_distance", "positions_in",
)  # fmt: skip


@dataclass
class ModelConfig:
    d_model: int = 512  # model width, 512 for base
    n_heads: int = 8  # attention heads; d_head = d_model / n_heads
    d_ff: int = 2048  # feed-forward inner width
    n_encoder_layers: int = 6  # encoder depth
    n_decoder_layers: int = 6  # decoder depth
    dropout: float = 0.1  # on embeddings, residual branches and feed-forward activations
    attention_dropout: float = 0.1  # on attention weights
    activation_dropout: float | None = None  # on feed-forward activations; null = `dropout`
    max_relative_position: int = 16  # k, the clipping distance; 0 = no relative positions
    relative_keys: bool = True  # a^K: relative term in the attention logits (eq. 4)
    relative_values: bool = True  # a^V: relative term in the attention outputs (eq. 3)
    sinusoidal: bool = False  # add the absolute sinusoidal encoding to the embeddings
    share_relative_across_heads: bool = False  # True: big model; False: base (per head)
    share_relative_across_layers: bool = False  # one set of tables for all layers of a stack
    tie_embeddings: bool = True  # one matrix for src/tgt embeddings and output
    pre_norm: bool = True  # LayerNorm before each sublayer (tensor2tensor), else after
    # Positions on two axes (docs/architecture.md): one absolute method beside the embeddings, one
    # relative method inside self-attention (encoder and decoder; cross-attention has none). The
    # sinusoid and Shaw keep their published switches above (sinusoidal, k), so runs and checkpoints
    # from before the axes read as absolute_positions=sinusoid, relative_positions=shaw. A switch
    # of one method set beside another method is refused (rpr_nmt/model/positions/setting.py).
    absolute_positions: str = "sinusoid"  # sinusoid (added when sinusoidal=true) | learned | none
    max_positions: int = 1024  # learned: rows of the position table, i.e. the longest input
    relative_positions: str = "shaw"  # shaw (on when k > 0) | rope | alibi | t5 | none
    rope_base: float = 10000.0  # rope: theta_i = base^(-2i / rope_dims); 10000 in Su et al.
    rope_dims: int | None = None  # rope: features rotated per head (even); null = all of d_head
    rope_layout: str = "interleaved"  # rope: rotated pairs (2i, 2i+1) "interleaved" or "halves"
    t5_num_buckets: int = 32  # t5: buckets of j - i (both signs together in the encoder); 32
    t5_max_distance: int = 128  # t5: distances from here on share the last bucket; 128 in T5
    # Which stacks get both methods: "both", or only the "encoder" (its embeddings and
    # self-attention) or the "decoder"; the other stack then sees no word order of its own.
    positions_in: str = "both"


@dataclass
class TrainConfig:
    max_steps: int = 100_000  # optimizer updates
    max_tokens: int = 4096  # tokens per batch: padded source or target tokens, whichever is larger
    update_freq: int = 1  # batches accumulated per update
    seed: int = 1  # seeds model init, batch order and dropout
    schedule: str = "noam"  # "noam" (the paper's) or "inverse_sqrt" (peak lr = lr)
    lr: float = 1.0  # noam: scale factor on the schedule; inverse_sqrt: the peak learning rate
    warmup_steps: int = 4000  # linear warmup steps
    cooldown: float = 0.0  # final share of the budget (steps or time limit) with lr falling to 0
    adam_beta1: float = 0.9  # Adam beta1
    adam_beta2: float = 0.98  # Adam beta2
    adam_eps: float = 1e-9  # Adam epsilon
    weight_decay: float = 0.0  # decoupled weight decay (AdamW); 0 = plain Adam
    label_smoothing: float = 0.1  # label-smoothed cross-entropy, padding ignored
    clip_norm: float = 0.0  # gradient clipping by global norm; 0 = off
    device: str = "auto"  # "auto" (cuda if available), "cpu" or "cuda"
    # "auto" (bf16 where the device computes it natively, else fp32: rpr_nmt/precision.py), "fp32",
    # "bf16" (autocast), "fp16" (CUDA, grad scaler); the presets say auto, the library fp32
    precision: str = "fp32"
    # reduced-precision arithmetic (rpr_nmt/model/arithmetic.py): 1 = the published bf16 runs'; 2 =
    # shared attention inputs cast once and NumPy's dropout masks; fp32 is the same under either;
    # null = the newest (2) for a new run, and for a resumed run the one it trained in
    arithmetic: int | None = 1
    compile: bool = False  # train through torch.compile (symbolic shapes)
    # what is compiled: "layers" (each encoder and decoder layer; one graph per layer kind serves
    # all of them, so it compiles in a fraction of the time) or "model" (the whole forward)
    compile_scope: str = "layers"
    log_every: int = 50  # steps between log lines and TensorBoard scalars
    valid_every: int = 1000  # steps between validations (also run at the end)
    save_every: int = 1000  # steps between checkpoints (one is always written at the end)
    keep_last: int = 5  # checkpoints kept besides the best one
    valid_bleu: bool = True  # decode part of the validation set for valid/bleu
    valid_bleu_sentences: int = 500  # sentences decoded for valid/bleu (greedy)
    best_metric: str = "loss"  # which validation figure picks the best checkpoint: "loss" or "bleu"
    max_bad_steps: int = 5  # stop after this many non-finite losses in a row
    average_last: int = 0  # at the end, also average the last N checkpoints; 0 = off
    ema_decay: float = 0.0  # moving average of the weights, e.g. 0.999; 0 = off
    evaluate_at_end: bool = True  # decode valid + test, BLEU into the summary
    # with evaluate_at_end, decode the test split too; false while a recipe is tuned on the valid
    # split, so that the test set is scored once, after the choice (rerun with true to score it)
    evaluate_test: bool = True
    max_time_minutes: float | None = None  # stop and save after this; null = no limit


@dataclass
class DecodeConfig:
    beam_size: int = 4  # beam width; 1 = greedy
    length_penalty: float = 0.6  # alpha in lp(Y) = ((5 + |Y|) / 6)^alpha
    max_len_a: float = 1.2  # maximum output length = a * source length + b
    max_len_b: int = 10  # see max_len_a
    min_len: int = 1  # minimum output length in tokens (eos excluded)
    nbest: int = 1  # hypotheses returned per sentence
    max_sentences: int = 128  # sentences decoded together (one batch)
    streams: int = 2  # CPU: batches decoded at once, each on its own thread; torch's threads split
    precision: str = "fp32"  # "auto" (bf16 where native, else fp32; the presets'), "fp32", "bf16"
    device: str = "auto"  # "auto", "cpu" or "cuda"


@dataclass
class TrainJobConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


@dataclass
class ModelChoiceConfig:
    """The model an inference command (evaluate, translate, score) uses: a checkpoint, several
    averaged, or an ensemble."""

    checkpoint: Any = MISSING  # a checkpoint path, or a list [a.pt,b.pt] averaged before use
    # instead of checkpoint=: models used as an ensemble, each a checkpoint file or a run folder
    ensemble: list[str] = field(default_factory=list)
    weights: str = "ema"  # "ema": the weight average when the checkpoint has one; "raw": trained


@dataclass
class SplitChoiceConfig(ModelChoiceConfig):
    """A model and the split of a corpus it reads (evaluate, score)."""

    split: str | None = None  # the split; null = the data config's test_split
    data: DataConfig | None = None  # defaults to the data config stored in the checkpoint
    data_root: str | None = None  # the corpus folder here, when it moved since training


@dataclass
class EvaluateJobConfig(SplitChoiceConfig):
    # more reference files for the split, line-aligned with it: multi-reference BLEU, chrF, TER
    extra_references: list[str] = field(default_factory=list)
    # sacreBLEU's tokenizer, e.g. intl, char, zh, none; null = its choice for the target language
    bleu_tokenize: str | None = None
    decode: DecodeConfig = field(default_factory=DecodeConfig)


@dataclass
class ScoreJobConfig(SplitChoiceConfig):
    source: str | None = None  # a source file to score instead of a split (with reference=)
    reference: str | None = None  # its reference translations, line-aligned with source=
    pairs: str | None = None  # a file of `source ||| reference` lines instead; "-" = stdin
    by_length: bool = False  # also tabulate perplexity by source-length bucket and target position
    bounds: list[int] = field(default_factory=lambda: list(DEFAULT_BOUNDS))  # bucket starts
    decode: DecodeConfig = field(default_factory=DecodeConfig)  # batching and precision only


@dataclass
class TranslateJobConfig(ModelChoiceConfig):
    input: str = "-"  # file of raw source sentences, "-" = stdin
    output: str = "-"  # file for translations, "-" = stdout
    # longest input line in BPE tokens, e.g. 1024: a longer line stops the run with its number
    # (lines are read at most 64 bytes per token, so that one line cannot exhaust memory)
    max_input_tokens: int = 1024
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def position_methods(model: ModelConfig | dict[str, Any]) -> tuple[str, str]:
    """The (absolute, relative) methods a model config puts to work, "none" where it has none.

    The published switches decide for the sinusoid and Shaw: absolute_positions=sinusoid adds
    nothing unless sinusoidal=true, and relative_positions=shaw learns nothing with k = 0 or with
    both a^K and a^V off. Takes a ModelConfig or the plain data of one (a run folder's stored
    config, a checkpoint's); keys it lacks read as the defaults, i.e. as before the axes existed.

    Returns:
        (absolute, relative), e.g. ("sinusoid", "none"), ("none", "shaw"), ("learned", "rope").
    """
    values = model if isinstance(model, dict) else asdict(model)
    default = ModelConfig()

    def get(key: str) -> Any:
        value = values.get(key)
        return getattr(default, key) if value is None else value

    absolute, relative = get("absolute_positions"), get("relative_positions")
    if absolute == "sinusoid" and not get("sinusoidal"):
        absolute = "none"
    shaw_terms = get("relative_keys") or get("relative_values")
    if relative == "shaw" and not (int(get("max_relative_position")) > 0 and shaw_terms):
        relative = "none"
    return absolute, relative


def position_stacks(model: ModelConfig | dict[str, Any]) -> str:
    """The stacks a model config puts its position methods in (ModelConfig.positions_in): "both",
    "encoder" or "decoder"; "both" for the plain data of a config from before the field."""
    values = model if isinstance(model, dict) else asdict(model)
    return values.get("positions_in") or "both"


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}


def section_from_dict(cls: type, values: dict[str, Any], where: str) -> Any:
    """One group's dataclass from plain data; fields the data lacks take today's defaults.

    Raises:
        ValueError: a key the schema does not have (named, with where it came from).
    """
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{where} has keys {unknown} that {cls.__name__} does not know")
    return cls(**values)


def job_config_from_dict(values: dict[str, Any], where: str = "config") -> TrainJobConfig:
    """The TrainJobConfig that dataclasses.asdict wrote (a checkpoint's "config" entry).

    Checkpoints written before a field existed load with that field's default.
    """
    sections = {
        name: section_from_dict(cls, dict(values.get(name) or {}), f"{where}[{name!r}]")
        for name, cls in _SECTIONS.items()
    }
    return TrainJobConfig(**sections)


@cache
def placement_keys() -> frozenset[str]:
    """The settings that extend or place a training run rather than change what it trains:
    configs/hydra/train.yaml's exclude_keys, which the run folder's name leaves out (a rerun with
    a larger train.max_steps continues the same folder). Read from that file, the one list."""
    path = Path(CONFIG_DIR) / "hydra" / "train.yaml"
    hydra = yaml.safe_load(path.read_text())
    return frozenset(hydra["job"]["config"]["override_dirname"]["exclude_keys"])


def override_key(text: str) -> str:
    """The config key a command-line override sets, without Hydra's prefixes:
    'train.lr=0.003' -> 'train.lr', '+train.seed=2' -> 'train.seed', '~model.x' -> 'model.x'."""
    return text.partition("=")[0].lstrip("+~")
