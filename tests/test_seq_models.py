"""LSTM attention models (Snell et al. 2021): masking, probes (Eqs. 2, 4, 9), Eq. (12), saliency."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell import seq_models as tsm  # noqa: E402
from minimal_attn.backends.snell.eval import _saliency, pad_batch  # noqa: E402

V = 11


class Task:                      # the few TextTask fields the models and saliency read
    def __init__(self, task):
        self.task, self.n_vocab, self.pad_id = task, V, V


def _classifier(attention="learned"):
    torch.manual_seed(0)
    return tsm.Classifier(V, emb=6, hidden=5, attention=attention).double().eval()


def _seq2seq(attention="learned"):
    torch.manual_seed(0)
    return tsm.Seq2Seq(V, hidden=6, out_hidden=7, attention=attention).double().eval()


SRC = [np.array([3, 4, 5, 6, 7]), np.array([8, 9])]
TGT = [np.array([4, 5, 2]), np.array([6, 2])]


def _translate_inputs():
    x, lengths = pad_batch(SRC, V, "cpu")
    y_in, _ = pad_batch([t[:-1] for t in TGT], V, "cpu", prefix=1)
    y, _ = pad_batch(TGT, V, "cpu")
    return x, lengths, y_in, y.clamp(max=V - 1)


@pytest.mark.parametrize("attention", ["learned", "uniform", "frozen"])
def test_padding_never_attended_and_uniform_is_uniform_over_real_tokens(torch_one_thread,
                                                                       attention):
    x, lengths = pad_batch(SRC, V, "cpu")
    out = _classifier(attention)(x, lengths)
    alpha = out["alpha"].detach()
    assert alpha[1, 2:].abs().max() == 0                                 # padding: exactly 0
    assert torch.allclose(alpha.sum(1), torch.ones(2, dtype=alpha.dtype))
    x2, l2, y_in, _ = _translate_inputs()
    alpha2 = _seq2seq(attention)(x2, l2, y_in)["alpha"].detach()         # (B, T, L)
    assert alpha2[1, :, 2:].abs().max() == 0
    if attention == "uniform":
        assert torch.allclose(alpha[1, :2], torch.full((2,), 0.5, dtype=alpha.dtype))
        assert torch.allclose(alpha2[0], torch.full((3, 5), 0.2, dtype=alpha2.dtype))


def test_padding_does_not_change_a_sequence(torch_one_thread):
    """The short example alone and padded beside a long one give the same output."""
    model = _classifier()
    x, lengths = pad_batch(SRC, V, "cpu")
    x1, l1 = pad_batch(SRC[1:], V, "cpu")
    together, alone = model(x, lengths)["logit"][1].item(), model(x1, l1)["logit"][0].item()
    assert float(together) == pytest.approx(float(alone), abs=1e-12)


def test_frozen_trains_only_the_attention_layer():
    trainable = {n for n, p in _classifier("frozen").named_parameters() if p.requires_grad}
    assert trainable == {"Q.weight", "Q.bias", "v.weight", "v.bias"}
    assert {n for n, p in _seq2seq("frozen").named_parameters() if p.requires_grad} == \
        {"Wa.weight"}


def _one_hot_at(pos):
    def attn(logits, mask, attention):
        out = torch.zeros_like(logits)
        out[..., pos] = 1.0
        return out
    return attn


@pytest.mark.parametrize("pos", [0, 1])
def test_probe_equals_output_under_one_hot_attention(torch_one_thread, monkeypatch, pos):
    """Eqs. (2) and (4): with alpha one-hot at pos, c_t = h_l so p_t[y_t] = beta_{t,pos}."""
    x, lengths, y_in, y = _translate_inputs()
    model = _seq2seq()
    monkeypatch.setattr(tsm, "masked_attention", _one_hot_at(pos))
    out = model(x, lengths, y_in)
    p = out["logp"].gather(-1, y[..., None]).squeeze(-1).exp()            # (B, T)
    beta = model.probe(out, y)                                           # (B, T, L)
    assert torch.allclose(p, beta[:, :, pos], atol=1e-12)
    cls = _classifier()
    xc, lc = pad_batch(SRC, V, "cpu")
    yc = torch.tensor([1, 0])
    outc = cls(xc, lc)
    p_correct = torch.sigmoid((2 * yc - 1) * outc["logit"])
    assert torch.allclose(p_correct, cls.probe(outc, yc)[:, pos], atol=1e-12)


@pytest.mark.parametrize("attention", ["learned", "uniform"])
def test_classification_identity_eq12(torch_one_thread, attention):
    """p_correct = sigmoid(sum_l alpha_l logit(beta_l)), Eq. (12), to 1e-6."""
    model = _classifier(attention)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)                                                  # non-trivial logits
    x, lengths = pad_batch(SRC, V, "cpu")
    for y in ([1, 0], [0, 1]):
        y = torch.tensor(y)
        out = model(x, lengths)
        beta = model.probe(out, y)
        p_correct = torch.sigmoid((2 * y - 1) * out["logit"])
        real = out["mask"]
        logit_beta = torch.where(real, torch.log(beta) - torch.log1p(-beta), 0.0)
        rhs = torch.sigmoid((out["alpha"] * logit_beta).sum(1))
        assert torch.allclose(p_correct, rhs, atol=1e-6, rtol=0)


def _scaled_logp(model, task, x, lengths, y, y_in, b, t, pos, eps):
    """log p_t[y_t] of example b with the embedding of word pos scaled by (1 + eps)."""
    emb = model.embed(x).detach().clone()
    emb[b, pos] *= 1.0 + eps
    with torch.no_grad():
        if task.task == "classify":
            logit = model(x, lengths, emb=emb)["logit"][b]
            return float(torch.nn.functional.logsigmoid((2 * y[b] - 1) * logit))
        return float(model(x, lengths, y_in, emb=emb)["logp"][b, t, y[b, t]])


@pytest.mark.parametrize("kind", ["classify", "translate"])
def test_saliency_equals_finite_differences(torch_one_thread, kind):
    """Delta_{t,pos} = grad . e_l is the derivative along e_l: (f(1+eps) - f(1-eps)) / 2 eps."""
    task = Task(kind)
    if kind == "classify":
        model, (x, lengths), y_in = _classifier(), pad_batch(SRC, V, "cpu"), None
        y = torch.tensor([1, 0])
    else:
        model = _seq2seq()
        x, lengths, y_in, y = _translate_inputs()
    delta = _saliency(model, task, x, lengths, y, y_in).detach()          # (B, T, L)
    eps = 1e-5
    cases = [(0, 0, 0), (0, 0, 3), (1, 0, 1)] + ([(0, 2, 4)] if kind == "translate" else [])
    for b, t, pos in cases:
        fd = (_scaled_logp(model, task, x, lengths, y, y_in, b, t, pos, eps)
              - _scaled_logp(model, task, x, lengths, y, y_in, b, t, pos, -eps)) / (2 * eps)
        assert float(delta[b, t, pos]) == pytest.approx(fd, rel=1e-5, abs=1e-9)
