"""The moving average of the weights: its update rule, its swap into the model, and the trainer's
use of it (saved, resumed exactly, used by validation and by evaluation)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rpr_nmt.checkpoint import load_checkpoint, load_for_inference
from rpr_nmt.train import Trainer, train
from rpr_nmt.train.ema import WeightAverage, ema_decay_at

from .conftest import compose_config


def toy() -> nn.Module:
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 2.0]]))
        model.bias.fill_(0.0)
    return model


def test_decay_warms_up_then_holds():
    assert ema_decay_at(0.999, 1) == pytest.approx(2 / 11)
    assert ema_decay_at(0.999, 10) == pytest.approx(11 / 20)
    assert ema_decay_at(0.5, 100) == 0.5


def test_update_rule_by_hand():
    model = toy()
    ema = WeightAverage(model, decay=0.5)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[3.0, 6.0]]))
        model.bias.fill_(1.0)
    ema.update(model, step=1)  # d_1 = min(0.5, 2 / 11) = 2 / 11
    d = 2 / 11
    expected = torch.tensor([[d * 1 + (1 - d) * 3, d * 2 + (1 - d) * 6]])
    torch.testing.assert_close(ema.average["weight"], expected)
    torch.testing.assert_close(ema.average["bias"], torch.tensor([1 - d]))
    ema.update(model, step=100)  # d = 0.5 from here on
    torch.testing.assert_close(ema.average["bias"], torch.tensor([0.5 * (1 - d) + 0.5]))
    assert ema.average["weight"].dtype == torch.float32


def test_swap_puts_the_average_in_and_the_weights_back():
    model = toy()
    ema = WeightAverage(model, decay=0.9)
    with torch.no_grad():
        model.weight.add_(10.0)
    with ema.swapped_into(model):
        torch.testing.assert_close(model.weight, torch.tensor([[1.0, 2.0]]))
    torch.testing.assert_close(model.weight, torch.tensor([[11.0, 12.0]]))


def test_bad_decay_is_refused():
    with pytest.raises(ValueError, match="ema_decay must be in"):
        WeightAverage(toy(), decay=1.0)


QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.ema_decay=0.9")


def test_trainer_saves_resumes_exactly_and_validates_with_the_average(corpus, cache_dir, tmp_path):
    common = (*QUIET, "train.valid_every=3", "train.save_every=2")
    straight = train(
        compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "a"
    )
    train(compose_config(corpus, cache_dir, *common, "train.max_steps=3"), tmp_path / "b")
    resumed = train(compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "b")
    a = load_checkpoint(tmp_path / "a" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")
    assert a.ema is not None and a.ema.keys() == b.ema.keys()
    for name in a.ema:
        assert torch.equal(a.ema[name], b.ema[name]), name  # exactly, not approximately
        assert a.ema[name].dtype == torch.float32
    assert resumed["best_valid_loss"] == straight["best_valid_loss"]
    assert any(not torch.equal(a.ema[n], a.model[n].float()) for n in a.ema)

    # Validation scores the average: without it the same run validates differently.
    plain = [o for o in common if not o.startswith("train.ema_decay")]
    raw = Trainer(compose_config(corpus, cache_dir, *plain, "train.max_steps=6"), tmp_path / "c")
    assert raw.run()["best_valid_loss"] != straight["best_valid_loss"]


def test_evaluation_loads_the_average_unless_asked_for_the_raw_weights(corpus, cache_dir, tmp_path):
    train(compose_config(corpus, cache_dir, *QUIET, "train.max_steps=2"), tmp_path / "run")
    path = tmp_path / "run" / "checkpoints" / "last.pt"
    state = load_checkpoint(path)
    averaged, _, _ = load_for_inference(path)
    trained, _, _ = load_for_inference(path, use_ema=False)
    name = next(n for n in state.ema if not torch.equal(state.ema[n], state.model[n].float()))
    torch.testing.assert_close(averaged.state_dict()[name], state.ema[name])
    torch.testing.assert_close(trained.state_dict()[name], state.model[name])
