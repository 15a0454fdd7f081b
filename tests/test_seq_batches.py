"""Splits padded once on the device (backends/snell/batches.py) give the tensors of pad_batch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from minimal_attn.backends.snell import seq_models  # noqa: E402
from minimal_attn.backends.snell.batches import SplitTensors  # noqa: E402
from minimal_attn.backends.snell.config import SeqTrainConfig  # noqa: E402
from minimal_attn.backends.snell.eval import (  # noqa: E402
    batch_loss,
    evaluate,
    length_order,
    list_batch,
)
from minimal_attn.backends.snell.train import build_model  # noqa: E402
from minimal_attn.datasets.seq import TextTask  # noqa: E402


def _task(kind, n=23, seed=0):
    rng = np.random.default_rng(seed)
    src = [rng.integers(3, 12, rng.integers(1, 9)) for _ in range(n)]
    if kind == "classify":
        tgt = [np.array([int(rng.integers(0, 2))]) for _ in src]
        return TextTask("classify", src, tgt, src[:9], tgt[:9], n_vocab=12, n_out=2,
                        itos=[str(i) for i in range(12)])
    tgt = [np.concatenate([rng.integers(3, 12, rng.integers(0, 7)), [2]]) for _ in src]
    return TextTask("translate", src, tgt, src[:9], tgt[:9], n_vocab=12, n_out=12,
                    itos=[str(i) for i in range(12)],
                    decode=lambda ids: " ".join(str(int(i)) for i in ids))


@pytest.mark.parametrize("kind", ["classify", "translate"])
def test_a_batch_cut_from_the_split_equals_pad_batch(kind):
    task = _task(kind)
    split = SplitTensors(task, task.train_src, task.train_tgt, "cpu")
    rng = np.random.default_rng(1)
    for _ in range(20):
        idx = rng.integers(0, len(task.train_src), rng.integers(1, 9))
        got = split.batch(idx)
        want = list_batch(task, [task.train_src[i] for i in idx],
                          [task.train_tgt[i] for i in idx], "cpu")
        for a, b in zip(got, want):
            if b is None:
                assert a is None
            else:
                assert a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


def _encode_torch(lstm, emb, lengths):
    """The encoder as torch packs it (enforce_sorted=False): the reference of _encode."""
    packed = pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
    out, state = lstm(packed)
    return pad_packed_sequence(out, batch_first=True, total_length=emb.shape[1])[0], state


def test_encode_equals_torchs_packing_bit_for_bit():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(5, 4, 2, batch_first=True, bidirectional=True)
    lengths = torch.tensor([3, 7, 1, 7, 4, 2])
    emb = torch.randn(6, 7, 5)
    h, (hn, cn) = seq_models._encode(lstm, emb, lengths)
    h_ref, (hn_ref, cn_ref) = _encode_torch(lstm, emb, lengths)
    assert torch.equal(h, h_ref) and torch.equal(hn, hn_ref) and torch.equal(cn, cn_ref)
    assert torch.all(h[2, 1:] == 0)                       # padding enters no state


@pytest.mark.parametrize("kind", ["classify", "translate"])
def test_evaluate_equals_one_example_at_a_time(kind, torch_one_thread):
    # batching and the single read-back change nothing: each example alone gives its rows
    task = _task(kind)
    c = SeqTrainConfig(task=kind, hidden=8, emb=6, out_hidden=8, dropout=0.0).resolved()
    torch.manual_seed(2)
    model = build_model(task, c)
    split = SplitTensors(task, task.val_src, task.val_tgt, "cpu")
    r = evaluate(model, task, split, want_beta=True, want_delta=True, batch_size=4)
    hits = 0
    for i, (x, y) in enumerate(zip(task.val_src, task.val_tgt)):
        one = evaluate(model, task, SplitTensors(task, [x], [y], "cpu"), want_beta=True,
                       want_delta=True)
        for key in ("alpha", "beta", "delta"):
            assert r[key][i].shape == one[key][0].shape == (1 if kind == "classify" else len(y),
                                                            len(x))
            np.testing.assert_allclose(r[key][i], one[key][0], rtol=1e-5, atol=1e-6)
        hits += one["perf"] * (1 if kind == "classify" else len(y))
    total = len(task.val_src) if kind == "classify" else sum(len(y) for y in task.val_tgt)
    assert r["perf"] == pytest.approx(hits / total)
    part = evaluate(model, task, split, n=5, want_beta=False, batch_size=4)
    assert len(part["alpha"]) == 5 and "beta" not in part
    for a, b in zip(part["alpha"], r["alpha"]):       # example 4 sits in another batch
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_evaluation_batches_group_examples_of_like_size():
    # sizes T_n L_n by hand: sources of 3, 1, 2, 2, 4 ids, targets of 1, 5, 2, 1, 1 ids
    # (the final </s> included) give 3, 5, 4, 2, 4; the two 4s keep their order
    src = [np.arange(3, 3 + k) for k in (3, 1, 2, 2, 4)]
    tgt = [np.concatenate([np.full(k - 1, 5), [2]]) for k in (1, 5, 2, 1, 1)]
    task = TextTask("translate", src, tgt, src, tgt, n_vocab=12, n_out=12,
                    itos=[str(i) for i in range(12)])
    split = SplitTensors(task, src, tgt, "cpu")
    assert length_order(split, 5).tolist() == [3, 0, 2, 4, 1]
    assert length_order(split, 3).tolist() == [0, 2, 1]          # the first n only
    labels = [np.array([0])] * 5
    classify = TextTask("classify", src, labels, src, labels, n_vocab=12, n_out=2,
                        itos=[str(i) for i in range(12)])
    assert length_order(SplitTensors(classify, src, labels, "cpu"), 5).tolist() == [1, 2, 3,
                                                                                   0, 4]


def test_batch_loss_of_the_split_equals_the_list_route(torch_one_thread):
    task = _task("translate")
    c = SeqTrainConfig(task="translate", hidden=8, out_hidden=8, dropout=0.0).resolved()
    torch.manual_seed(3)
    model = build_model(task, c)
    split = SplitTensors(task, task.train_src, task.train_tgt, "cpu")
    idx = np.array([4, 0, 17, 9, 9])
    for paradigm in ("sa", "lv"):
        a = batch_loss(model, task, split.batch(idx), paradigm)
        b = batch_loss(model, task, list_batch(task, [task.train_src[i] for i in idx],
                                               [task.train_tgt[i] for i in idx], "cpu"),
                       paradigm)
        assert torch.equal(a, b) and torch.isfinite(a)


@pytest.mark.parametrize("rule, budget", [("sa", None), ("lv", None), ("lv", 4096),
                                          ("ha", 4096)])
def test_tiled_saliency_equals_one_backward_per_word(torch_one_thread, monkeypatch, rule,
                                                      budget):
    # the GPU's route (copies of the batch, one backward per group) on the CPU; an HA or LV
    # model's per-word route takes its (B, T, L, V) chunks one at a time (a small budget:
    # several chunks, which the tiled route checkpoints)
    from minimal_attn.backends.snell import attention_losses
    from minimal_attn.backends.snell.eval import _saliency, _saliency_tiled

    if budget is not None:
        monkeypatch.setattr(attention_losses, "CPU_CHUNK_BYTES", budget)
    task = _task("translate")
    c = SeqTrainConfig(task="translate", hidden=8, out_hidden=8, dropout=0.5).resolved()
    torch.manual_seed(4)
    model = build_model(task, c).eval()
    model.rule = rule
    b = SplitTensors(task, task.val_src, task.val_tgt, "cpu").batch(np.arange(9))
    loop = _saliency(model, task, b.x, b.lengths, b.y, b.y_in, tiled=False)
    assert loop.shape == (9, b.y.shape[1], b.x.shape[1])
    for rows in (9, 20):                            # 1 and 2 words a group
        torch.testing.assert_close(_saliency_tiled(model, task, b.x, b.lengths, b.y, b.y_in,
                                                   max_rows=rows), loop, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(_saliency(model, task, b.x, b.lengths, b.y, b.y_in, tiled=True),
                               loop, rtol=1e-5, atol=1e-6)      # every word in one group
    assert loop.abs().sum() > 0


def test_greedy_hyps_do_not_depend_on_the_decoding_batch(torch_one_thread, monkeypatch):
    # a GPU decodes DECODE_BATCH sentences at a time, the CPU an evaluation batch: the same
    # ids, each sentence capped as in its evaluation batch (here none ever ends: </s> = 99)
    from minimal_attn.backends.snell import eval as ev

    monkeypatch.setattr(ev, "EOS", 99)
    task = _task("translate")
    c = SeqTrainConfig(task="translate", hidden=8, out_hidden=8).resolved()
    torch.manual_seed(5)
    model = build_model(task, c).eval()
    split = SplitTensors(task, task.train_src, task.train_tgt, "cpu")
    per_batch = ev.greedy_hyps(model, split, 21, 4, 4)
    assert [len(h) for h in per_batch] == [
        2 * int(split.src_len[s - s % 4:min(s - s % 4 + 4, 21)].max()) + 10 for s in range(21)]
    assert ev.greedy_hyps(model, split, 21, 4, 256) == per_batch
    assert ev.greedy_hyps(model, split, 21, 4, 7) == per_batch
