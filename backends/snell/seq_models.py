r"""LSTM attention models of Snell et al. (2021), Sections 2.1, 2.2, 2.4 and Appendix A.8.

* :class:`Classifier`: embedding, 1-layer bidirectional LSTM (``hidden`` per
  direction, so :math:`h_l \in R^{2H}`), additive attention Snell Eq. (7)
  :math:`a_l = v^T \mathrm{ReLU}(Q h_l)`, output Snell Eq. (8)
  :math:`p^{pos} = \sigma(W^T \sum_l \alpha_l h_l)`, probe Snell Eq. (9). With the
  paper's sizes (300, 256) it has 1,274,882 parameters besides the embeddings,
  the count A.8 gives: Q (512 -> 256), v (256 -> 1) and W (512 -> 1) carry biases,
  which Snell Eqs. (7)-(8) do not print.
* :class:`Seq2Seq`: one embedding shared by source and target, 2-layer
  bidirectional LSTM encoder (``hidden/2`` per direction, so :math:`h_l \in R^H`),
  2-layer LSTM decoder started from the encoder's last states (the two
  directions concatenated), dot attention Snell Eq. (1) :math:`a_{t,l} = s_t^T W h_l`,
  context Snell Eq. (2), :math:`p_t = N([c_t, s_t])` with one ReLU hidden layer,
  probe Snell Eq. (4) :math:`\beta_{t,l} = N([h_l, s_t])_{y_t}`. Dropout (``dropout``,
  training only) on the embeddings, between the LSTM layers and on N's inputs
  :math:`c_t, s_t` (HA/LV: :math:`h_l, s_t`), not on the attention scores; A.8 says
  only "The LSTMs used dropout 0.5", so the places are our choice. The classifier
  has none.

``rule`` (an attribute, default ``"sa"``) is the paradigm whose inference rule
gives the output (V&R Sec. 2.3; :mod:`.attention_losses`): ``sa`` reads the
context vector, ``ha``/``hybrid`` the most-attended position's distribution and
``lv`` the alpha-weighted mixture of the per-position distributions, which are
the lexical probe's (Snell Eqs. (4), (9)): one code path serves both.

``attention`` is ``"learned"`` (the standard model), ``"uniform"`` (alpha fixed
to 1/L over the real tokens, Section 3.2 and A.7) or ``"frozen"`` (A.6: every
parameter frozen at its initial value except the attention layer, Q and v or W).
Padding never receives attention: its logits are set to -inf before the
softmax, and sequences are packed so that padding never enters an LSTM state.
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from minimal_attn.backends.snell.attention_losses import (
    chunk_size,
    infer,
    log_attention,
    over_target_chunks,
)
from minimal_attn.backends.snell.batches import to_device


def masked_attention(logits, mask, attention):
    """Snell Eq. (1)/(7): softmax over the real positions (uniform if ``attention == "uniform"``).

    logits : (..., L); mask : (..., L) bool, True at real tokens. Returns alpha (..., L).
    """
    if attention == "uniform":
        m = mask.to(logits.dtype)
        return m / m.sum(-1, keepdim=True)
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


def position_logp(h_in, s_in, output):
    r"""Snell Eq. (4): :math:`\log N([h_l, s_t])` for every (t, l), shape (..., T, L, V).

    N's hidden layer is linear in :math:`[h_l, s_t]`, so it is split into
    ``h_in`` (..., L, K), h_l's share, and ``s_in`` (..., T, K), s_t's share plus
    the bias; ``output`` maps the ReLU hidden layer (..., K) to logits (..., V).
    The probe beta, HA/LV training and HA/LV inference all read these numbers.
    """
    hid = torch.relu(h_in.unsqueeze(-3) + s_in.unsqueeze(-2))           # (..., T, L, K)
    return torch.log_softmax(output(hid), -1)                           # (..., T, L, V)


def pick(logp, y):
    """``logp[..., t, l, y_t]``: (..., T, L, V) and y (..., T) -> (..., T, L)."""
    idx = y[..., None, None].expand(y.shape + (logp.shape[-2], 1))
    return logp.gather(-1, idx).squeeze(-1)


def _encode(lstm, emb, lengths):
    """``lstm`` over the packed rows of ``emb`` (B, L, E): h (B, L, ·) and the last states.

    What ``pack_padded_sequence(..., enforce_sorted=False)`` and the LSTM do, step for step
    (sort by length, pack, run, put the rows back), but the sort stays on the host: torch's
    own moves the order to the card and back, and each move waits for the card.
    """
    lengths = lengths.cpu()              # no-op for the host lengths the loops pass
    sorted_len, order = torch.sort(lengths, descending=True)
    unsort = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel()))
    order, unsort = to_device(order, emb.device), to_device(unsort, emb.device)
    packed = pack_padded_sequence(emb.index_select(0, order), sorted_len, batch_first=True)
    out, (hn, cn) = lstm(packed)
    h, _ = pad_packed_sequence(out, batch_first=True, total_length=emb.shape[1])
    return h.index_select(0, unsort), (hn.index_select(1, unsort), cn.index_select(1, unsort))


def _mask(x, lengths):
    """(B, L) bool, True at the real tokens; ``lengths`` on the host or on x's device."""
    lengths = to_device(lengths, x.device)
    return torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]


def _freeze_all_but(model, keep):
    for name, p in model.named_parameters():
        p.requires_grad_(name.split(".")[0] in keep)


class Classifier(nn.Module):
    """Binary classifier of Wiegreffe & Pinter (2019) as used in Section 2.4."""

    def __init__(self, n_vocab, emb=300, hidden=256, attention="learned"):
        super().__init__()
        self.attention, self.rule = attention, "sa"
        self.embed = nn.Embedding(n_vocab + 1, emb, padding_idx=n_vocab)   # last id: padding
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.Q = nn.Linear(2 * hidden, hidden)     # Snell Eq. (7)
        self.v = nn.Linear(hidden, 1)
        self.W = nn.Linear(2 * hidden, 1)          # Snell Eq. (8)
        if attention == "frozen":
            _freeze_all_but(self, ("Q", "v"))

    def encode(self, x, lengths, emb=None):
        """h (B, L, 2H) from ids x (B, L); ``emb`` (B, L, E) replaces the lookup (saliency)."""
        emb = self.embed(x) if emb is None else emb
        return _encode(self.lstm, emb, lengths)[0]

    def forward(self, x, lengths, emb=None):
        """Returns ``logit`` (B,) of p_pos, ``alpha`` and ``log_alpha`` (B, L), ``gamma`` (B, L)
        = W^T h_l + b; ``logit`` by the inference rule ``self.rule``."""
        mask = _mask(x, lengths)                                          # (B, L)
        h = self.encode(x, lengths, emb)                                  # (B, L, 2H)
        a = self.v(torch.relu(self.Q(h))).squeeze(-1)                     # (B, L), Snell Eq. (7)
        alpha = masked_attention(a, mask, self.attention)                 # (B, L)
        log_alpha = log_attention(a, mask, self.attention == "uniform")   # (B, L)
        gamma = self.W(h).squeeze(-1)                                     # (B, L)
        if self.rule == "sa":
            # Snell Eq. (8): W^T sum_l alpha_l h_l + b = sum_l alpha_l (W^T h_l + b), which is
            # Snell Eq. (12): the logit of p^correct is sum_l alpha_l sigmoid^-1(beta_l)
            logit = self.W((alpha.unsqueeze(-1) * h).sum(1)).squeeze(-1)  # (B,)
        else:     # per-position p(y | h_l) = sigmoid(+-gamma_l), two classes (neg, pos)
            logp_pos = torch.stack([nn.functional.logsigmoid(-gamma),
                                    nn.functional.logsigmoid(gamma)], -1)   # (B, L, 2)
            logp = infer(self.rule, log_alpha, logp_pos)                    # (B, 2)
            logit = logp[:, 1] - logp[:, 0]
        return {"logit": logit, "alpha": alpha, "log_alpha": log_alpha, "gamma": gamma,
                "mask": mask}

    @staticmethod
    def position_log_lik(out, y):
        """Snell Eq. (9) in log space: log beta_l = logsigmoid((2y - 1) gamma_l), (B, L)."""
        sign = (2 * y - 1).to(out["gamma"].dtype)
        return nn.functional.logsigmoid(sign[:, None] * out["gamma"])

    @classmethod
    def probe(cls, out, y):
        """Snell Eq. (9): beta_l = sigmoid((2y - 1) W^T h_l), shape (B, L); y (B,) in {0, 1}."""
        return cls.position_log_lik(out, y).exp()


class Seq2Seq(nn.Module):
    """LSTM encoder-decoder with Luong dot attention, Section 2.1 and A.8."""

    def __init__(self, n_vocab, hidden=256, out_hidden=256, layers=2, dropout=0.5,
                 attention="learned"):
        super().__init__()
        if hidden % 2:
            raise ValueError("hidden must be even: the encoder has hidden/2 per direction")
        self.attention, self.hidden, self.layers, self.rule = attention, hidden, layers, "sa"
        drop = dropout if layers > 1 else 0.0
        self.embed = nn.Embedding(n_vocab + 1, hidden, padding_idx=n_vocab)   # shared
        self.enc = nn.LSTM(hidden, hidden // 2, layers, batch_first=True, bidirectional=True,
                           dropout=drop)
        self.dec = nn.LSTM(hidden, hidden, layers, batch_first=True, dropout=drop)
        self.drop = nn.Dropout(dropout)
        self.Wa = nn.Linear(hidden, hidden, bias=False)       # Snell Eq. (1): s^T W h
        self.N1 = nn.Linear(2 * hidden, out_hidden)           # N of Snell Eq. (2): [c, s] -> ReLU
        self.N2 = nn.Linear(out_hidden, n_vocab)
        if attention == "frozen":
            _freeze_all_but(self, ("Wa",))

    def encode(self, x, lengths, emb=None):
        """h (B, L, H) and the decoder's initial state from the encoder's last states."""
        emb = self.drop(self.embed(x) if emb is None else emb)
        h, (hn, cn) = _encode(self.enc, emb, lengths)
        B = x.shape[0]

        def join(s):                                          # (2 layers, B, H/2) -> (layers, B, H)
            s = s.view(self.layers, 2, B, self.hidden // 2)
            return torch.cat([s[:, 0], s[:, 1]], dim=-1).contiguous()
        return h, (join(hn), join(cn))

    def decode(self, y_in, h, state, mask):
        """Teacher-forced decoder: s (B, T, H), alpha and log_alpha (B, T, L), state."""
        s, state = self.dec(self.drop(self.embed(y_in)), state)           # (B, T, H)
        a = torch.einsum("btk,blk->btl", s, self.Wa(h))                   # (B, T, L), Snell Eq. (1)
        m = mask[:, None, :].expand_as(a)
        alpha = masked_attention(a, m, self.attention)
        return s, alpha, log_attention(a, m, self.attention == "uniform"), state

    def map_positions(self, h, s, fn, *per_t):
        """``fn(logp_pos, *chunks)`` over chunks of target tokens, concatenated along T.

        ``logp_pos`` (B, T_c, L, V) is :func:`position_logp` of the chunk
        (Snell Eq. (4)); ``per_t`` are (B, T, ...) tensors cut the same way. Chunks keep
        the (B, T, L, V) tensor within :data:`.attention_losses.CHUNK_BYTES`.
        """
        H = self.hidden
        Wc, Ws = self.N1.weight[:, :H], self.N1.weight[:, H:]            # split [c, s] -> hidden
        h_in, s_in = h @ Wc.T, s @ Ws.T + self.N1.bias                    # (B, L, K), (B, T, K)
        B, L = h.shape[:2]
        chunk = chunk_size(B * L * (self.N2.out_features + Wc.shape[0]), h.element_size(),
                           device=h.device)
        return over_target_chunks(lambda s_c, *a: fn(position_logp(h_in, s_c, self.N2), *a),
                                  (s_in,) + tuple(per_t), 1, chunk)

    def position_log_lik(self, out, y):
        """log p(y_t | s_t, h_l) = log N([h_l, s_t])_{y_t}, (B, T, L): Snell Eq. (4), with the
        dropout of training on h and s (as SA has it on c and s)."""
        return self.map_positions(self.drop(out["h"]), self.drop(out["s"]), pick, y)

    def infer_logp(self, h, s, log_alpha, rule):
        """log p_t (B, T, V) by the HA or LV inference rule (V&R Sec. 2.3)."""
        return self.map_positions(h, s, lambda lp, la: infer(rule, la, lp), log_alpha)

    def output_logp(self, c, s):
        """log N([c, s]) over the vocabulary, Snell Eq. (2): (..., V)."""
        return torch.log_softmax(self.N2(torch.relu(self.N1(torch.cat([c, s], -1)))), -1)

    def forward(self, x, lengths, y_in, emb=None, rule=None):
        """Returns ``logp`` (B, T, V), ``alpha`` and ``log_alpha`` (B, T, L), ``h`` (B, L, H),
        ``s`` (B, T, H). ``logp`` follows ``rule`` (default ``self.rule``); ``rule="none"``
        leaves it out (HA and LV training need only the per-position likelihoods)."""
        rule = self.rule if rule is None else rule
        mask = _mask(x, lengths)                                          # (B, L)
        h, state = self.encode(x, lengths, emb)
        s, alpha, log_alpha, _ = self.decode(y_in, h, state, mask)
        out = {"alpha": alpha, "log_alpha": log_alpha, "h": h, "s": s, "mask": mask}
        if rule == "sa":
            c = torch.einsum("btl,blk->btk", alpha, h)                    # (B, T, H), Snell Eq. (2)
            out["logp"] = self.output_logp(self.drop(c), self.drop(s))
        elif rule != "none":
            out["logp"] = self.infer_logp(self.drop(h), self.drop(s), log_alpha, rule)
        return out

    def probe(self, out, y):
        """Snell Eq. (4): beta_{t,l} = N([h_l, s_t])_{y_t}, shape (B, T, L); y (B, T) targets."""
        return self.map_positions(out["h"], out["s"], pick, y).exp()

    @torch.no_grad()
    def greedy(self, x, lengths, bos, eos, max_len):
        """Greedy decoding: list of id lists (without </s>), one per input."""
        mask = _mask(x, lengths)
        h, state = self.encode(x, lengths)
        tok = torch.full((x.shape[0], 1), bos, dtype=torch.long, device=x.device)
        out, done = [], torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
        every = 1 if x.device.type == "cpu" else 8     # reading ``done`` waits for the card
        for i in range(max_len):
            s, alpha, log_alpha, state = self.decode(tok, h, state, mask)
            if self.rule == "sa":
                logp = self.output_logp(torch.einsum("btl,blk->btk", alpha, h), s)
            else:
                logp = self.infer_logp(h, s, log_alpha, self.rule)
            tok = logp.argmax(-1)                                         # (B, 1)
            out.append(tok[:, 0])
            done |= tok[:, 0] == eos
            if (i + 1) % every == 0 and bool(done.all()):
                break                            # later tokens follow </s>: cut below
        seqs = torch.stack(out, 1).tolist()
        return [s[:s.index(eos)] if eos in s else s for s in seqs]
