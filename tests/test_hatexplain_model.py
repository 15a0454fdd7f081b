"""Text FCAMs of V&R Appendix A.3: masking, padding invariance, shapes, inference rules."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from minimal_attn.backends import torch_backend as tb  # noqa: E402
from minimal_attn.backends.vr.text_models import (  # noqa: E402
    TextFCAMConfig,
    build_text_fcam,
    positional_encoding,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")
EMBEDDINGS = ["standard", "self-attention"]
LENGTHS = [5, 2, 7, 3]


def _model(embedding, seed=0):
    model = build_text_fcam(TextFCAMConfig(vocab_size=30, n_classes=3, embedding=embedding,
                                           embed_dim=8, focus_hidden=6, classifier_hidden=10,
                                           ff_hidden=12), seed=seed).double()
    with torch.no_grad():                     # a non-uniform focus, so attention is not trivial
        model.focus[-1].weight.normal_(generator=torch.Generator().manual_seed(seed + 1))
    return model


def _batch(extra=0, seed=0):
    """Posts of LENGTHS padded to max + ``extra`` with *random* ids in the padding."""
    g = torch.Generator().manual_seed(seed)
    length = max(LENGTHS) + extra
    ids = torch.randint(2, 30, (len(LENGTHS), max(LENGTHS)), generator=g)
    pad = torch.randint(0, 30, (len(LENGTHS), length), generator=torch.Generator().manual_seed(99))
    mask = torch.arange(length)[None, :] < torch.tensor(LENGTHS)[:, None]      # (B, L)
    pad[:, : max(LENGTHS)] = torch.where(mask[:, : max(LENGTHS)], ids, pad[:, : max(LENGTHS)])
    return pad, mask, torch.tensor([0, 2, 1, 2])


def _loss_and_grads(model, ids, mask, y, phase):
    model.zero_grad()
    scores, logits = model(ids, mask, phase)
    value = tb.loss(phase, scores, logits, y)
    value.backward()
    return value.detach(), scores.detach(), {k: p.grad.clone() for k, p in
                                              model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("embedding", EMBEDDINGS)
@pytest.mark.parametrize("phase", ["sa", "ha", "lv"])
def test_padding_gets_zero_attention_and_more_padding_changes_nothing(embedding, phase):
    model = _model(embedding)
    ids, mask, y = _batch()
    value, scores, grads = _loss_and_grads(model, ids, mask, y, phase)
    a = tb.attention(scores)
    assert torch.all(a[~mask] == 0)                                      # exactly zero
    torch.testing.assert_close(a.sum(1), torch.ones(4, dtype=a.dtype))
    assert torch.isfinite(value) and all(torch.isfinite(g).all() for g in grads.values())
    # pad further with other (random) ids: the loss and every gradient stay the same
    ids2, mask2, _ = _batch(extra=6)
    value2, scores2, grads2 = _loss_and_grads(model, ids2, mask2, y, phase)
    torch.testing.assert_close(value2, value, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(scores2[:, : ids.shape[1]][mask], scores[mask])
    assert grads2.keys() == grads.keys()
    for key in grads:
        torch.testing.assert_close(grads2[key], grads[key], rtol=1e-10, atol=1e-12)
    for paradigm in ("sa", "ha", "lv", "hybrid"):
        torch.testing.assert_close(model.predict(ids2, mask2, paradigm)[1],
                                   model.predict(ids, mask, paradigm)[1])


@pytest.mark.parametrize("embedding", EMBEDDINGS)
def test_shapes_match_the_cnn_fcam_and_inference_rules(embedding):
    model = _model(embedding)
    ids, mask, _ = _batch()
    scores, logits_sa = model(ids, mask, "sa")
    _, logits = model(ids, mask, "ha")
    assert scores.shape == (4, 7) and logits_sa.shape == (4, 3) and logits.shape == (4, 7, 3)
    # HA/LV logits are g applied to each token's representation
    h = model.tokens(ids, mask)
    torch.testing.assert_close(logits[2, 4], model.classifier(h[2, 4]))
    assert torch.all(logits[~mask] == 0)
    # SA classifies the attention-weighted average of the token representations
    h_tilde = (tb.attention(scores)[:, :, None] * h).sum(1)
    torch.testing.assert_close(logits_sa, model.classifier(h_tilde))
    # predict: HA classifies only the top token and equals infer_ha on all of them
    torch.testing.assert_close(model.predict(ids, mask, "ha")[1], tb.infer_ha(scores, logits))
    torch.testing.assert_close(model.predict(ids, mask, "lv")[1], tb.infer_lv(scores, logits))
    torch.testing.assert_close(model.predict(ids, mask, "sa")[1], tb.infer_sa(logits_sa))


@pytest.mark.parametrize("embedding", EMBEDDINGS)
def test_attention_starts_uniform_over_real_tokens(embedding):
    model = build_text_fcam(TextFCAMConfig(vocab_size=30, embedding=embedding), seed=3)
    ids, mask, _ = _batch()
    a = tb.attention(model(ids, mask, "sa")[0])
    expected = mask / torch.tensor(LENGTHS)[:, None]
    torch.testing.assert_close(a, expected.to(a.dtype))


def test_lv_gradient_with_masked_scores_matches_finite_differences():
    model = _model("self-attention")
    ids, mask, y = _batch()
    _, _, grads = _loss_and_grads(model, ids, mask, y, "lv")
    params = dict(model.named_parameters())
    g = torch.Generator().manual_seed(5)
    v = {k: torch.randn(p.shape, generator=g, dtype=p.dtype) for k, p in params.items()}
    eps = 1e-6

    def loss_at(sign):
        with torch.no_grad():
            for k, p in params.items():
                p.add_(sign * eps * v[k])
            scores, logits = model(ids, mask, "lv")
            value = float(tb.loss("lv", scores, logits, y))
            for k, p in params.items():
                p.sub_(sign * eps * v[k])
        return value

    directional = sum(float((grads[k] * v[k]).sum()) for k in grads)
    fd = (loss_at(1) - loss_at(-1)) / (2 * eps)
    assert fd == pytest.approx(directional, rel=1e-5, abs=1e-8)


def test_positional_encoding_values():
    pe = positional_encoding(3, 4)
    # position 1, dims (0, 1): sin(1), cos(1); dims (2, 3): frequency 10000^(-2/4) = 0.01
    np.testing.assert_allclose(pe[1].numpy(), [np.sin(1), np.cos(1), np.sin(0.01),
                                               np.cos(0.01)], rtol=1e-6)
    np.testing.assert_allclose(pe[0].numpy(), [0, 1, 0, 1])
