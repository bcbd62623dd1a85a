"""Every primary config composes with every group option; typos and wrong types fail early.

The group files describe themselves (every schema field, each with a comment), and run folders keep
their names: a command line maps to the same folder as before, so rerunning it resumes the run.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import rpr_nmt.cli.run_folder  # noqa: F401  the run-folder name resolver, as rpr-nmt-train has it
from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.config import (
    DataConfig,
    DecodeConfig,
    ModelConfig,
    TrainConfig,
    TranslateJobConfig,
    job_config_from_dict,
)
from tests.conftest import REPO, compose_command

GROUPS = {
    "data": DataConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}
PUBLIC_NAMES = {
    "data": {"multi30k_en_de", "multi30k_en_fr", "wmt14_en_de", "wmt14_en_fr", "local"},
    "model": {"transformer_tiny", "transformer_small", "transformer_base", "transformer_big"},
    "positions": {"absolute", "relative", "both", "relative_k4", "relative_k16"},
}
PRIMARY_EXTRA = {
    "train": [], "evaluate": ["checkpoint=x.pt"], "translate": ["checkpoint=x.pt"],
    "score": ["checkpoint=x.pt"],
}  # fmt: skip


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def compose_job(name: str, overrides: list[str], hydra: bool = False):
    return compose_command(PRIMARY_EXTRA[name] + overrides, name, hydra)


def test_public_config_names_exist():
    for group, names in PUBLIC_NAMES.items():
        assert names <= set(options(group))


@pytest.mark.parametrize("primary", ["train", "evaluate", "translate", "score"])
@pytest.mark.parametrize("group", list(GROUPS))
def test_every_primary_composes_with_every_option(primary, group):
    groups_of = {
        "train": set(GROUPS), "evaluate": {"data", "decode"}, "translate": {"decode"},
        "score": {"data", "decode"},
    }  # fmt: skip
    if group not in groups_of[primary]:
        pytest.skip(f"{primary} has no {group} group")
    for option in options(group):
        cfg = compose_job(primary, [f"{group}={option}"])
        node = cfg[group]
        # Every key of the schema is present and resolves; nothing outside the schema crept in.
        assert set(node.keys()) == set(GROUPS[group].__dataclass_fields__)
        OmegaConf.to_container(node, resolve=True)


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment):
    cfg = compose_job("train", [f"experiment={experiment}"])
    assert cfg.model.d_model > 0


def test_data_root_comes_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RPR_NMT_DATA", str(tmp_path))
    cfg = compose_job("train", ["data=wmt14_en_fr"])
    assert cfg.data.root == f"{tmp_path}/wmt14_enfr"
    cfg = compose_job("train", ["data=local", "data.root=/some/where"])
    assert cfg.data.root == "/some/where"


def test_paper_presets_carry_the_paper_settings():
    base = compose_job("train", ["model=transformer_base"]).model
    big = compose_job("train", ["model=transformer_big"]).model
    for model, (k, shared) in ((base, (16, False)), (big, (8, True))):
        assert model.max_relative_position == k and model.share_relative_across_heads == shared
        assert not model.sinusoidal
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout) == (1024, 16, 4096, 0.3)


@pytest.mark.parametrize("size", ["base", "big"])
def test_a_paper_setup_takes_another_training_recipe_whole(size):
    """`experiment=paper_* train=cpu_short` trains by cpu_short alone (it had kept the paper's
    batches, schedule and budget and taken cpu_short's clipping and EMA), and keeps its model."""
    paper = compose_job("train", [f"experiment=paper_{size}_en_de"])
    assert (paper.train.max_tokens, paper.train.schedule, paper.train.warmup_steps) == (
        25000, "noam", 4000,
    )  # fmt: skip
    assert paper.train.average_last == (20 if size == "big" else 0)
    mixed = compose_job("train", [f"experiment=paper_{size}_en_de", "train=cpu_short"])
    alone = compose_job("train", ["train=cpu_short"])
    assert mixed.train == alone.train
    assert mixed.model.d_model == paper.model.d_model
    tiny = compose_job("train", [f"experiment=paper_{size}_en_de", "model=transformer_tiny"])
    assert tiny.model == compose_job("train", ["model=transformer_tiny"]).model


@pytest.mark.parametrize(
    "override",
    [
        "model.max_relative_positon=4",  # misspelled key
        "model.max_relative_position=four",  # wrong type
        "train.max_tokens=1.5",  # float for an int
        "data=wmt15_en_de",  # unknown group option
    ],
)
def test_bad_override_fails_at_composition(override):
    with pytest.raises(ConfigCompositionException):
        compose_job("train", [override])


def test_evaluate_takes_one_or_several_checkpoints():
    assert compose_job("evaluate", []).checkpoint == "x.pt"
    cfg = compose_job("evaluate", ["checkpoint=[a.pt,b.pt]", "split=val"])
    assert list(cfg.checkpoint) == ["a.pt", "b.pt"] and cfg.split == "val"
    assert cfg.data is None


@pytest.mark.parametrize(
    "group, option", [(group, option) for group in GROUPS for option in options(group)]
)
def test_every_group_file_lists_every_schema_field_with_a_comment(group, option):
    path = Path(CONFIG_DIR) / group / f"{option}.yaml"
    text = path.read_text()
    listed = yaml.safe_load(text)
    assert listed.pop("defaults") == [f"{group}_schema"]
    schema = {f.name for f in fields(GROUPS[group])}
    assert set(listed) == schema, (
        f"{path}: missing {schema - set(listed)}, extra {set(listed) - schema}"
    )
    for line in text.splitlines():
        key = re.match(r"^(\w+):", line)
        if key and key[1] != "defaults":
            assert re.search(r"\s# \S", line), f"{path}: {key[1]} has no comment"


@pytest.mark.parametrize("data", options("data"))
def test_cache_dir_comes_from_environment(monkeypatch, tmp_path, data):
    monkeypatch.delenv("RPR_NMT_CACHE", raising=False)
    assert compose_job("train", [f"data={data}"]).data.cache_dir == "data/cache"
    monkeypatch.setenv("RPR_NMT_CACHE", str(tmp_path))
    assert compose_job("train", [f"data={data}"]).data.cache_dir == str(tmp_path)


def test_a_tilde_the_shell_left_is_the_home_folder(monkeypatch, tmp_path):
    # RPR_NMT_CACHE='~/x' made a folder named `~` in the current one; "data.root='~/corpus'"
    # failed with "expected ~/corpus/train.en".
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RPR_NMT_CACHE", "~/x")
    data = to_job_config(compose_job("train", ["data=local", "data.root='~/corpus'"])).data
    assert (data.root, data.cache_dir) == (f"{tmp_path}/corpus", f"{tmp_path}/x")
    # A checkpoint's stored data config (read by rpr-nmt-evaluate, -score, -inspect) too.
    stored = job_config_from_dict({"data": {"root": "~/c", "cache_dir": "~"}}).data
    assert (stored.root, stored.cache_dir) == (f"{tmp_path}/c", str(tmp_path))
    assert DataConfig(root="data/local", cache_dir="/abs/c~").root == "data/local"
    assert DataConfig(cache_dir="/abs/c~").cache_dir == "/abs/c~"


def test_positions_is_a_group_of_the_defaults_list():
    model = compose_job("train", ["positions=absolute"]).model  # no "+" needed
    assert model.sinusoidal and model.max_relative_position == 0
    model = compose_job("train", ["model=transformer_base", "positions=relative_k4"]).model
    assert not model.sinusoidal and model.max_relative_position == 4 and model.d_model == 512
    # Without positions=..., the model preset alone decides.
    preset = yaml.safe_load((Path(CONFIG_DIR) / "model" / "transformer_small.yaml").read_text())
    del preset["defaults"]
    assert OmegaConf.to_container(compose_job("train", []).model) == preset


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_swept_value_composes(experiment):
    params = compose_job("train", [f"experiment={experiment}"], hydra=True).hydra.sweeper.params
    for key, values in (params or {}).items():
        for value in str(values).split(","):
            compose_job("train", [f"experiment={experiment}", f"{key}={value.strip()}"])


@contextmanager
def hydra_config(cfg, during_job: bool = True):
    """The composed config's hydra node; during_job: Hydra's run-time config set, as in a job, so
    that ${hydra:...} resolves (the sweeper reads hydra.sweep.dir before that)."""
    instance = HydraConfig.instance()
    saved = instance.cfg
    if during_job:
        instance.set_config(cfg)
    else:
        instance.cfg = None
    try:
        yield cfg.hydra
    finally:
        instance.cfg = saved


@pytest.mark.parametrize(
    "overrides, run_dir",
    [
        ([], "runs/train/default"),
        (["model=transformer_base"], "runs/train/model=transformer_base"),
        # Settings that extend or place a run do not rename it.
        (
            ["model.max_relative_position=4", "train.max_steps=2000", "train.device=cpu"],
            "runs/train/model.max_relative_position=4",
        ),
        (["train.max_time_minutes=5", "train=cpu_short"], "runs/train/train=cpu_short"),
        (["train.evaluate_test=true", "model.dropout=0.3"], "runs/train/model.dropout=0.3"),
        (
            ["positions=absolute", "model=transformer_base"],
            "runs/train/model=transformer_base,positions=absolute",
        ),
        (["hydra.run.dir=runs/demo", "train=cpu_short"], "runs/demo"),
        (["experiment=paper_base_en_de"], "runs/paper_base_en_de/default"),
        (
            ["experiment=paper_big_en_fr", "train.max_tokens=3125"],
            "runs/paper_big_en_fr/train.max_tokens=3125",
        ),
    ],
)
def test_run_folder_is_named_after_the_overrides(monkeypatch, overrides, run_dir):
    monkeypatch.delenv("RPR_NMT_RUNS", raising=False)
    with hydra_config(compose_job("train", overrides, hydra=True)) as hydra:
        assert hydra.job.name == "train"
        assert hydra.run.dir == run_dir


@pytest.mark.parametrize(
    "overrides, sweep_dir, subdir",
    [
        (["train.seed=2"], "runs/sweeps/train", "train.seed=2"),
        (
            ["experiment=ablate_k", "model.max_relative_position=4", "train.seed=2"],
            "runs/sweeps/ablate_k_multi30k_en_de",
            "model.max_relative_position=4,train.seed=2",
        ),
        (
            ["experiment=ablate_terms", "model.relative_keys=true", "model.relative_values=false"],
            "runs/sweeps/ablate_terms_multi30k_en_de",
            "model.relative_keys=true,model.relative_values=false",
        ),
        (
            ["experiment=absolute_vs_relative", "positions=both"],
            "runs/sweeps/absolute_vs_relative_multi30k_en_de",
            "positions=both",
        ),
        (
            ["experiment=length_generalisation", "positions=relative_k4", "data=multi30k_en_fr"],
            "runs/sweeps/length_generalisation_multi30k_en_fr",
            "data=multi30k_en_fr,positions=relative_k4",
        ),
    ],
)
def test_sweep_folders_are_named_after_the_experiment_and_overrides(
    monkeypatch, overrides, sweep_dir, subdir
):
    monkeypatch.delenv("RPR_NMT_RUNS", raising=False)
    with hydra_config(compose_job("train", overrides, hydra=True)) as hydra:
        assert (hydra.sweep.dir, hydra.sweep.subdir) == (sweep_dir, subdir)


def test_sweep_folder_is_known_before_any_job(monkeypatch):
    monkeypatch.delenv("RPR_NMT_RUNS", raising=False)
    for overrides, sweep_dir in [
        (["train.seed=1"], "runs/sweeps/train"),  # rpr-nmt-train -m train.seed=1,2
        (["experiment=ablate_k"], "runs/sweeps/ablate_k_multi30k_en_de"),
    ]:
        cfg = compose_job("train", overrides, hydra=True)
        with hydra_config(cfg, during_job=False) as hydra:
            assert hydra.sweep.dir == sweep_dir


def test_runs_folder_comes_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RPR_NMT_RUNS", str(tmp_path))
    with hydra_config(compose_job("train", ["train.seed=2"], hydra=True)) as hydra:
        assert hydra.run.dir == f"{tmp_path}/train/train.seed=2"
        assert hydra.sweep.dir == f"{tmp_path}/sweeps/train"
    with hydra_config(compose_job("evaluate", [], hydra=True)) as hydra:
        assert hydra.job.name == "evaluate"
        assert re.fullmatch(rf"{tmp_path}/evaluate/\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d", hydra.run.dir)


def test_score_reads_fp32_whatever_the_decode_preset():
    for preset in options("decode"):
        cfg = compose_job("score", [f"decode={preset}", "by_length=true"])
        assert cfg.decode.precision == "fp32" and cfg.by_length and cfg.bounds[0] == 1


def test_translate_reads_its_input_line_limit_into_translate_job_config():
    # max_input_tokens lived in a subclass in cli/config_store.py; the schema is rpr_nmt/config.py.
    assert TranslateJobConfig().max_input_tokens == 1024
    for overrides, limit in (([], 1024), (["max_input_tokens=50"], 50)):
        job = to_job_config(compose_job("translate", overrides))
        assert type(job) is TranslateJobConfig and job.max_input_tokens == limit


def test_translate_writes_no_files_of_its_own():
    with hydra_config(compose_job("translate", [], hydra=True)) as hydra:
        assert (hydra.job.name, hydra.run.dir, hydra.output_subdir) == ("translate", ".", None)
        assert hydra.runtime.choices["hydra/job_logging"] == "none"
        assert hydra.runtime.choices["hydra/hydra_logging"] == "none"


@pytest.mark.parametrize("native", [True, False])
def test_the_demo_preset_is_cpu_short_where_bf16_is_native_and_its_fp32_branch_elsewhere(
    monkeypatch, native
):
    from dataclasses import asdict, replace

    from rpr_nmt import precision
    from rpr_nmt.cli.config_store import to_job_config

    found = precision.Bf16Support(native, "a CPU of the test's choosing")
    monkeypatch.setattr(precision, "_cpu_bf16_support", lambda: found)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    demo = to_job_config(compose_job("train", ["train=demo"])).train
    cpu_short = to_job_config(compose_job("train", ["train=cpu_short"])).train
    assert demo.precision == "auto" and cpu_short.precision == "bf16"
    if native:  # the published recipe, value for value
        assert asdict(replace(demo, precision="bf16")) == asdict(cpu_short)
    else:  # smaller batches, a shorter warmup; the rest as cpu_short
        assert (demo.max_tokens, demo.warmup_steps) == (2000, 100)
        assert asdict(replace(demo, precision="bf16", max_tokens=6000, warmup_steps=400)) == (
            asdict(cpu_short)
        )


# The position study reuses published runs (docs/results_positions.md): the study's command must
# compose, for those settings, the configuration each published run recorded, key for key. Keys
# added since (the later position methods' fields) are absent from the old records; the published
# code's losses are checked by tests/train/test_published_settings_unchanged.py.
STUDY_RECIPE = ["train=cpu_short", "train.max_time_minutes=null", "train.max_steps=1400"]
SEED_1 = "train.seed=1,train=cpu_short"
REUSED = {  # the study's positions= -> the published run it reuses (seed 1)
    "absolute": f"absolute_vs_relative_multi30k_en_de/positions=absolute,{SEED_1}",
    "relative": f"ablate_k_multi30k_en_de/model.max_relative_position=16,{SEED_1}",
    "none": f"ablate_k_multi30k_en_de/model.max_relative_position=0,{SEED_1}",
}


@pytest.mark.parametrize("positions", list(REUSED))
def test_the_position_study_composes_the_published_runs_it_reuses(positions):
    recorded = REPO / "results" / REUSED[positions] / ".hydra" / "config.yaml"
    if not recorded.is_file():
        pytest.skip(f"{recorded} is not in this checkout")
    published = yaml.safe_load(recorded.read_text())
    study = ["experiment=compare_positions", f"positions={positions}", "train.seed=1"]
    composed = OmegaConf.to_container(compose_job("train", study + STUDY_RECIPE), resolve=False)
    for section in ("model", "train", "data", "decode"):
        old, new = published[section], composed[section]
        differing = {k: (v, new.get(k, "<absent>")) for k, v in old.items() if new.get(k) != v}
        assert not differing, f"{section} of {REUSED[positions]}: recorded -> composed {differing}"
