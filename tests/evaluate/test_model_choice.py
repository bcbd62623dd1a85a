"""What rpr-nmt-evaluate, -translate and -score accept as their model: the checks on ensemble
members, and how checkpoint= and ensemble= are written. Subprocesses on the tiny checkpoints of
tests/evaluate/tiny.py."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from rpr_nmt.checkpoint import load_checkpoint, save_checkpoint
from rpr_nmt.cli.common import bracket_ensemble
from tests.checkpoint.test_inference import reversed_copy
from tests.evaluate.tiny import cli


def one_line_error(out, prog: str) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"{prog}: error: ")
    return out.stderr


def test_an_ensemble_of_opposite_directions_is_refused(tiny_run, tmp_path):
    # Probe S2: en->de + de->en members sharing a joint BPE model decoded together, rc 0.
    a, deen = tiny_run["a"], reversed_copy(tiny_run["b"], tmp_path / "deen.pt")
    for command in ("evaluate", "translate"):
        out = cli(command, f"ensemble=[{a},{deen}]", "hydra.run.dir=run", cwd=tmp_path,
                  stdin="a man.\n")  # fmt: skip
        err = one_line_error(out, f"rpr-nmt-{command}")
        assert f"members {a} (en-de) and {deen} (de-en) translate different language" in err
    out = cli("evaluate", f"checkpoint=[{a},{deen}]", "hydra.run.dir=run", cwd=tmp_path)
    assert "translate different language pairs" in one_line_error(out, "rpr-nmt-evaluate")
    assert not (tmp_path / "run" / "eval_test.json").exists()


def test_a_member_named_twice_is_refused(tiny_run, tmp_path):
    # Probe K6: [A,A] was accepted silently, the same as A alone, recorded as two models.
    a = tiny_run["a"]
    relative = os.path.relpath(a, tmp_path)  # the same file written another way
    cases = [
        (f"[{a},{a}]", f"ensemble members 1 and 2 are the same checkpoint ({a})"),
        (f"[{tiny_run['b']},{a},{relative}]", "ensemble members 2 and 3 are the same checkpoint"),
    ]
    for members, message in cases:
        out = cli("evaluate", f"ensemble={members}", "hydra.run.dir=run", cwd=tmp_path)
        err = one_line_error(out, "rpr-nmt-evaluate")
        assert message in err and err.endswith(": name each model once\n")
    assert not list((tmp_path / "run").glob("eval_*"))


def test_a_member_named_twice_through_a_hard_link_or_its_run_folder_is_refused(tiny_run, tmp_path):
    # Probe: a run's last.pt is a hard link to its newest step_*.pt (and a run folder stands for
    # its step checkpoints): both spellings were accepted and recorded as 2 models.
    checkpoints = tmp_path / "run_a" / "checkpoints"
    checkpoints.mkdir(parents=True)
    step, last = checkpoints / "step_0000300.pt", checkpoints / "last.pt"
    step.write_bytes(tiny_run["a"].read_bytes())
    os.link(step, last)
    for second in ("run_a/checkpoints/step_0000300.pt", "run_a"):
        out = cli("evaluate", f"ensemble=[run_a/checkpoints/last.pt,{second}]",
                  "hydra.run.dir=run", cwd=tmp_path)  # fmt: skip
        err = one_line_error(out, "rpr-nmt-evaluate")
        assert err.endswith(
            "ensemble members 1 and 2 are the same checkpoint (run_a/checkpoints/last.pt and "
            "run_a/checkpoints/step_0000300.pt are one file): name each model once\n"
        )
    assert not list((tmp_path / "run").glob("eval_*"))


def test_the_json_records_the_weights_that_were_loaded(tiny_run, tmp_path):
    # Probe S8: eval_*.json and score_*.json did not say whether EMA or raw weights were used.
    state = load_checkpoint(tiny_run["a"])
    ema = {k: v.float() + 0.5 for k, v in state.model.items() if v.is_floating_point()}
    with_ema = save_checkpoint(replace(state, ema=ema), tmp_path / "ema.pt")
    cases = [  # (model, weights=, recorded weights); a.pt has no weight average
        (f"checkpoint={with_ema}", "ema", "ema"),
        (f"checkpoint={with_ema}", "raw", "raw"),
        (f"checkpoint={tiny_run['a']}", "ema", "raw"),
        (f"ensemble=[{with_ema},{tiny_run['b']}]", "ema", ["ema", "raw"]),
    ]
    for number, (model, asked, loaded) in enumerate(cases):
        run = tmp_path / f"run{number}"
        args = [model, f"weights={asked}", f"hydra.run.dir={run}"]
        out = cli("evaluate", *args, "decode.beam_size=1", "decode.max_len_b=2", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        record = json.loads((run / "eval_test.json").read_text())
        assert (record["weights"], record["weights_asked"]) == (loaded, asked)
        described = loaded if isinstance(loaded, str) else "/".join(loaded)
        assert f", {described} weights;" in out.stdout
    out = cli("score", f"checkpoint={tiny_run['a']}", f"hydra.run.dir={tmp_path}/s", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    record = json.loads((tmp_path / "s" / "score_test.json").read_text())
    assert (record["weights"], record["weights_asked"]) == ("raw", "ema")


def test_ensemble_of_one_path_without_brackets_is_that_list(tiny_run, tmp_path):
    # Probe U7: `ensemble=PATH` gave Hydra's "str is not a ListConfig".
    a = tiny_run["a"]
    text, args = "a man rides a bike.\n", ["decode.max_len_b=3"]
    outs = [
        cli("translate", model, *args, cwd=tmp_path, stdin=text)
        for model in (f"checkpoint={a}", f"ensemble={a}")
    ]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout and outs[0].stdout.count("\n") == 1
    assert bracket_ensemble(["prog", "ensemble=a.pt", "checkpoint=b.pt"]) == [
        "prog", "ensemble=[a.pt]", "checkpoint=b.pt",
    ]  # fmt: skip
    for argv in (["p", "ensemble=[a,b]"], ["p", "ensemble=null"], ["p", "-m", "ensemble=a,b"]):
        assert bracket_ensemble(argv) == argv


def test_a_run_folder_with_last_pt_alone_points_at_it(tiny_run, tmp_path):
    # Probe U8: "neither a checkpoint file nor a run directory with checkpoints/step_*.pt".
    run = tmp_path / "onlylast"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(tiny_run["a"].read_bytes())
    for folder in (run, run / "checkpoints"):
        out = cli("evaluate", f"checkpoint={folder}", "hydra.run.dir=r", cwd=tmp_path)
        assert one_line_error(out, "rpr-nmt-evaluate").endswith(
            f"error: {folder} holds no step_*.pt checkpoints to average, only "
            f"{run / 'checkpoints' / 'last.pt'}: name that file instead\n"
        )


def test_a_length_penalty_that_is_not_a_number_is_one_line(tiny_run, tmp_path):
    # Probe C9: decode.length_penalty=nan gave a traceback.
    model = f"checkpoint={tiny_run['a']}"
    out = cli("translate", model, "decode.length_penalty=nan", cwd=tmp_path, stdin="a man.\n")
    err = one_line_error(out, "rpr-nmt-translate")
    assert "decode.length_penalty must be a finite number (e.g. 0.6; 0 = off), got nan" in err
