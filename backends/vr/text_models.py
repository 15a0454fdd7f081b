r"""The text FCAMs of V&R Appendix A.3: HateXplain-1 and HateXplain-2.

Vashisht & Ramaswamy (2023), Section 5 and Appendix A.3. A post is a batch row
of token ids (B, L) with a mask (B, L) (True on real tokens). Both models embed
the tokens, :math:`h_j` (B, L, D), then

* focus f: a one-hidden-layer ReLU MLP :math:`h_j \mapsto f_j`, one score per token;
  padded tokens get the score :math:`-\infty`, so their attention is exactly 0;
* classifier g: a one-hidden-layer ReLU MLP (200 units) on the attention-
  weighted average :math:`\tilde h = \sum_j a_j h_j` (SA) or on every token
  :math:`h_j` (HA, LV), batched over all real tokens of the batch at once.

========================  =====================================  ============
embedding                 token representation h_j               focus hidden
========================  =====================================  ============
``standard`` (-1)         word embedding (100)                   200
``self-attention`` (-2)   embedding + sinusoidal positions, then  50
                          one 2-head transformer encoder layer
========================  =====================================  ============

``forward(ids, mask, paradigm)`` returns ``(scores, logits)`` with the shapes
and meaning of the CNN FCAM (:class:`.models.FCAM`): scores (B, L),
logits (B, C) for ``sa`` and (B, L, C) for ``ha``/``lv``, so the losses and
inference rules of :mod:`.torch_backend` apply unchanged. They need no masked
variant: a score of :math:`-\infty` gives attention 0 (softmax), a zero HA
weight times the finite cross-entropy of a padded token (whose logits are
set to 0), and :math:`-\infty` inside the LV log-sum-exp; ``argmax`` never
picks a padded token. ``tests/test_hatexplain_model.py`` checks that padding a
batch further changes neither the losses nor their gradients.

Initialisation (from a seeded CPU generator, independent of the device):
embeddings N(0, 1), matrices Xavier-normal, biases 0, the focus output layer 0,
so every real token starts with the same score (uniform attention), as the
CNN FCAM does. The transformer layer has no dropout, so training is
deterministic and a resumed run repeats an uninterrupted one exactly. Its
feed-forward width is not given in the paper; ``ff_hidden`` defaults to 200.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from minimal_attn.backends import torch_backend as tb
from minimal_attn.errors import InputError

EMBEDDINGS = ("standard", "self-attention")


@dataclass(frozen=True)
class TextFCAMConfig:
    """Sizes of a text FCAM (Appendix A.3)."""

    vocab_size: int
    n_classes: int = 2
    embedding: str = "standard"         # standard (HateXplain-1) or self-attention (-2)
    embed_dim: int = 100                # token embedding size
    focus_hidden: int = 0               # 0: the paper's, 200 (standard) or 50 (self-attention)
    classifier_hidden: int = 200        # hidden units of the classifier MLP
    heads: int = 2                      # self-attention heads
    ff_hidden: int = 200                # transformer feed-forward width (not in the paper)

    def focus_width(self):
        if self.focus_hidden:
            return int(self.focus_hidden)
        return 200 if self.embedding == "standard" else 50


def check_embedding(name):
    key = str(name).strip().lower().replace("_", "-")
    key = {"1": "standard", "2": "self-attention", "self": "self-attention"}.get(key, key)
    if key not in EMBEDDINGS:
        raise InputError(f"unknown embedding {name!r}: use standard or self-attention",
                         param="embedding")
    return key


def estimate_bytes(config, batch_size, length, n_posts):
    """Memory one text FCAM needs (bytes, an estimate): parameters with gradients and
    momentum, the padded splits on the device, and one batch's activations kept for the
    backward pass (the self-attention layer's (B, heads, L, L) scores included)."""
    D, F, G = config.embed_dim, config.focus_width(), config.classifier_hidden
    params = config.vocab_size * D + 4 * D * D + 2 * D * config.ff_hidden + D * (F + G)
    B, L = min(batch_size, n_posts), length
    per_token = 3 * D + config.ff_hidden + F + G + config.n_classes
    attention = config.heads * L if config.embedding == "self-attention" else 0
    return 4 * 3 * params + 10 * n_posts * L + 4 * 3 * B * L * (per_token + attention)


def positional_encoding(length, dim, device=None):
    r"""Sinusoidal positions of Vaswani et al. (2017): (length, dim), sin on even, cos on odd."""
    pos = torch.arange(length, dtype=torch.float32, device=device)[:, None]        # (L, 1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device)
                     * (-math.log(10000.0) / dim))                                  # (D/2,)
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return pe                                                                       # (L, D)


def mlp(n_in, hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


class TextFCAM(nn.Module):
    r"""Focus-classify attention model over the tokens of a post, V&R Appendix A.3."""

    def __init__(self, config, generator=None):
        super().__init__()
        self.config = config
        dim = config.embed_dim
        self.embed = nn.Embedding(config.vocab_size, dim)
        self.encoder = None
        if check_embedding(config.embedding) == "self-attention":
            self.encoder = nn.TransformerEncoderLayer(
                dim, config.heads, dim_feedforward=config.ff_hidden, dropout=0.0,
                batch_first=True)
        self.focus = mlp(dim, config.focus_width(), 1)
        self.classifier = mlp(dim, config.classifier_hidden, config.n_classes)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        for name, p in self.named_parameters():
            if name == "embed.weight":
                nn.init.normal_(p, generator=generator)
            elif p.ndim >= 2:
                nn.init.xavier_normal_(p, generator=generator)
            elif "norm" in name and name.endswith("weight"):
                nn.init.ones_(p)                         # LayerNorm gain
            else:
                nn.init.zeros_(p)                        # biases
        nn.init.zeros_(self.focus[-1].weight)            # uniform attention at the start

    def tokens(self, ids, mask):
        """Token representations h (B, L, D); rows of padding are left as computed."""
        h = self.embed(ids)                                                   # (B, L, D)
        if self.encoder is None:
            return h
        h = h + positional_encoding(ids.shape[1], h.shape[2], h.device)       # (B, L, D)
        return self.encoder(h, src_key_padding_mask=~mask)                    # (B, L, D)

    def scores(self, h, mask):
        """Focus scores (B, L), :math:`-\\infty` on padding; the MLP sees real tokens only."""
        scores = h.new_full(mask.shape, float("-inf"))                        # (B, L)
        scores[mask] = self.focus(h[mask])[:, 0]                              # (n_real,)
        return scores

    def token_logits(self, h, mask):
        """g(h_j) for every real token, (B, L, C); padded tokens get logits 0."""
        logits = h.new_zeros(h.shape[:2] + (self.config.n_classes,))          # (B, L, C)
        logits[mask] = self.classifier(h[mask])                               # (n_real, C)
        return logits

    def forward(self, ids, mask, paradigm):
        h = self.tokens(ids, mask)                                            # (B, L, D)
        scores = self.scores(h, mask)                                         # (B, L)
        if paradigm == "sa":
            h_tilde = torch.einsum("bl,bld->bd", tb.attention(scores), h)     # (B, D)
            return scores, self.classifier(h_tilde)                           # (B, C)
        if paradigm not in ("ha", "lv"):
            raise InputError(f"TextFCAM.forward needs a loss paradigm sa, ha or lv, got "
                             f"{paradigm!r} (resolve hybrid with losses.phase)")
        return scores, self.token_logits(h, mask)                             # (B, L, C)

    @torch.no_grad()
    def predict(self, ids, mask, paradigm):
        """(scores (B, L), class scores s (B, C)) by the paradigm's inference rule.

        HA (and hybrid) classify only the most-attended token, equal to
        :func:`.torch_backend.infer_ha` on all tokens.
        """
        h = self.tokens(ids, mask)
        scores = self.scores(h, mask)
        if paradigm == "sa":
            return scores, tb.infer_sa(self.classifier(
                torch.einsum("bl,bld->bd", tb.attention(scores), h)))
        if paradigm in ("ha", "hybrid"):
            top = scores.argmax(dim=1)                                        # (B,)
            chosen = h[torch.arange(h.shape[0], device=h.device), top]        # (B, D)
            return scores, tb.softmax(self.classifier(chosen))
        return scores, tb.infer_lv(scores, self.token_logits(h, mask))


def build_text_fcam(config, seed=0, device="cpu"):
    """A fresh :class:`TextFCAM` initialised from ``seed`` (CPU generator), on ``device``."""
    generator = torch.Generator().manual_seed(int(seed))
    return TextFCAM(config, generator).to(device)
