"""BatchIterator: the token bound, full coverage, rank sharding, resumption, and batch layout."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from rpr_nmt.data import BatchIterator, DataError, EncodedCorpus, Ragged, batching
from rpr_nmt.data.batching import make_batches
from tests.data import reference

PAD, BOS, EOS = 0, 2, 3


def _corpus(n: int = 500, seed: int = 0) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    rows = lambda: [rng.integers(4, 100, size=rng.integers(1, 40)).tolist() for _ in range(n)]  # noqa: E731
    return EncodedCorpus(Ragged.from_lists(rows()), Ragged.from_lists(rows()))


def _iterator(corpus: EncodedCorpus, **kw) -> BatchIterator:
    args = dict(max_tokens=256, pad_id=PAD, bos_id=BOS, eos_id=EOS, shuffle=True, seed=1)
    return BatchIterator(corpus, **{**args, **kw})


def test_batch_layout():
    corpus = EncodedCorpus(
        Ragged.from_lists([[10, 11, 12], [20]]), Ragged.from_lists([[30], [40, 41]])
    )
    (batch,) = list(_iterator(corpus, shuffle=False, max_tokens=100))
    order = batch.ids.tolist()
    src = {0: [10, 11, 12, EOS], 1: [20, EOS, PAD, PAD]}
    tgt_in = {0: [BOS, 30, PAD], 1: [BOS, 40, 41]}
    tgt_out = {0: [30, EOS, PAD], 1: [40, 41, EOS]}
    assert batch.src.tolist() == [src[i] for i in order]
    assert batch.tgt_in.tolist() == [tgt_in[i] for i in order]
    assert batch.tgt_out.tolist() == [tgt_out[i] for i in order]
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (6, 5)
    assert batch.src.dtype == torch.long and batch.to("cpu").src.equal(batch.src)


def test_max_tokens_and_each_example_once_per_epoch():
    corpus = _corpus()
    it = _iterator(corpus)
    epoch = list(itertools.islice(iter(it), len(it)))
    for b in epoch:
        assert b.src.shape[0] * max(b.src.shape[1], b.tgt_in.shape[1]) <= 256
        assert b.n_src_tokens == int((b.src != PAD).sum()) and b.n_tgt_tokens == int(
            (b.tgt_out != PAD).sum()
        )
    ids = torch.cat([b.ids for b in epoch]).sort().values
    assert ids.tolist() == list(range(len(corpus)))
    assert it.state_dict()["epoch"] == 0 and it.state_dict()["position"] == len(it)
    # The next epoch is another order of the same batches.
    nxt = list(itertools.islice(iter(it), len(it)))
    assert [b.ids.tolist() for b in nxt] != [b.ids.tolist() for b in epoch]
    assert torch.cat([b.ids for b in nxt]).sort().values.tolist() == list(range(len(corpus)))


def test_one_pass_without_shuffle():
    it = _iterator(_corpus(), shuffle=False)
    first, second = list(it), list(it)
    assert len(first) == len(it) and [b.ids.tolist() for b in first] == [
        b.ids.tolist() for b in second
    ]


def test_ranks_disjoint_equal_and_covering():
    corpus = _corpus()
    full = _iterator(corpus)
    ranks = [_iterator(corpus, rank=r, world_size=3) for r in range(3)]
    assert len({len(it) for it in ranks}) == 1 and 3 * len(ranks[0]) > len(full.batches) - 3
    seen = [torch.cat([b.ids for b in itertools.islice(iter(it), len(it))]) for it in ranks]
    all_ids = torch.cat(seen)
    assert len(set(all_ids.tolist())) == len(all_ids)  # disjoint
    # Shuffled epochs skip at most world_size - 1 batches; one unshuffled pass covers everything.
    one_pass = torch.cat(
        [b.ids for r in range(3) for b in _iterator(corpus, rank=r, world_size=3, shuffle=False)]
    )
    assert one_pass.sort().values.tolist() == list(range(len(corpus)))


def test_resume_gives_the_same_batches():
    corpus = _corpus()
    reference = [
        b.ids.tolist() for b in itertools.islice(iter(_iterator(corpus, rank=1, world_size=2)), 40)
    ]
    it = _iterator(corpus, rank=1, world_size=2)
    taken = [b.ids.tolist() for b in itertools.islice(iter(it), 23)]  # crosses an epoch boundary
    state = it.state_dict()
    resumed = _iterator(corpus, rank=1, world_size=2)
    resumed.load_state_dict(state)
    rest = [b.ids.tolist() for b in itertools.islice(iter(resumed), 17)]
    assert taken + rest == reference
    with pytest.raises(DataError, match="cannot resume"):
        _iterator(corpus, seed=2).load_state_dict(state)


@pytest.mark.parametrize(("saved", "now"), [(2, 1), (1, 2)])
def test_a_resume_in_another_world_size_is_refused_naming_both(saved, now):
    """Positions count batches per rank: rank 0 of 2 at position 10 has dealt perm[0:20] over both
    ranks, and one process taking position 10 would train perm[10:20] twice (1 -> 2 skips)."""
    corpus = _corpus()
    it = _iterator(corpus, rank=0, world_size=saved)
    list(itertools.islice(iter(it), 10))
    state = it.state_dict()
    resumed = _iterator(corpus, rank=0, world_size=now)
    with pytest.raises(DataError) as refused:
        resumed.load_state_dict(state)
    message = str(refused.value)
    assert f"saved by {saved} processes, now {now}" in message
    assert f"resume with the same number of processes (torchrun --nproc_per_node {saved}" in message
    assert "\n" not in message
    assert (resumed.epoch, resumed.position) == (0, 0)  # left as it was
    assert state["world_size"] == saved


def test_a_state_from_before_the_world_size_was_saved_resumes_as_before():
    corpus = _corpus()
    it = _iterator(corpus, rank=1, world_size=2)
    list(itertools.islice(iter(it), 10))
    state = {k: v for k, v in it.state_dict().items() if k != "world_size"}
    resumed = _iterator(corpus, rank=1, world_size=2)
    resumed.load_state_dict(state)
    assert next(iter(resumed)).ids.tolist() == next(iter(it)).ids.tolist()


def test_long_pair_gets_its_own_batch_and_too_few_batches_fail():
    corpus = EncodedCorpus(Ragged.from_lists([[5] * 50, [6]]), Ragged.from_lists([[7], [8]]))
    sizes = sorted(len(b) for b in _iterator(corpus, shuffle=False, max_tokens=20))
    assert sizes == [1, 1]
    with pytest.raises(DataError, match="fewer than world_size=4"):
        _iterator(corpus, max_tokens=20, world_size=4)


@pytest.mark.parametrize("max_tokens", [1, 50, 256, 4096])
def test_batches_equal_the_old_lexsort_batches(monkeypatch, max_tokens):
    monkeypatch.setattr(batching, "_BLOCK", 333)  # the counting sort over many blocks
    rng = np.random.default_rng(max_tokens)
    src_len = rng.integers(1, 60, size=5000)  # many ties in (max, source, target)
    tgt_len = rng.integers(1, 60, size=5000)
    old = reference.make_batches(src_len, tgt_len, max_tokens)
    new = make_batches(src_len.astype(np.int32), tgt_len.astype(np.int32), max_tokens)
    assert len(new) == len(old) and all(np.array_equal(a, b) for a, b in zip(new, old))
    assert new.flat.dtype == np.int32 and new.nbytes == 4 * 5000 + 8 * (len(old) + 1)
    huge = src_len.copy()
    huge[7] = 1 << 21  # beyond the packed sort key: the lexsort fallback
    assert [b.tolist() for b in make_batches(huge, tgt_len, 256)] == [
        b.tolist() for b in reference.make_batches(huge, tgt_len, 256)
    ]


def test_iterator_on_a_memory_mapped_corpus(tmp_path):
    corpus = _corpus()
    corpus.save(tmp_path / "c")
    loaded = EncodedCorpus.load(tmp_path / "c")
    a, b = _iterator(corpus), _iterator(loaded)
    for x, y in itertools.islice(zip(a, b), 30):
        assert x.src.equal(y.src) and x.tgt_in.equal(y.tgt_in) and x.tgt_out.equal(y.tgt_out)
        assert x.ids.equal(y.ids) and x.n_src_tokens == y.n_src_tokens
