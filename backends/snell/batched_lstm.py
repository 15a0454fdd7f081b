r"""Seed-batched LSTM attention models, Snell Eqs. (1)-(3), (8), (20)-(21), over a seed axis.

Every parameter carries a leading seed axis ``S``: ``params[name][r]`` belongs
to run ``r`` alone. The LSTM cell is written with batched matrix products
(``torch.bmm`` over the seed axis), so S models take one forward, one backward
and one Adam step (Adam is elementwise, and the training loss is the *sum* of
the per-seed losses, so each slice receives exactly its own seed's gradient).

Parameters live in a plain dict of tensors (the style guide's "dict keyed by
symbol"); shapes, with ``V`` ids, ``E`` embedding, ``H`` hidden, ``K`` heads:

=========  ================  =========================================
name       shape             meaning
=========  ================  =========================================
emb_src    (S, V, E)         input word embeddings
emb_tgt    (S, V, E)         decoder input embeddings (previous word)
enc_Wx     (S, E, 4H)        encoder LSTM input weights, gates i, f, g, o
enc_Wh     (S, H, 4H)        encoder LSTM recurrent weights
enc_b      (S, 1, 4H)        encoder LSTM bias
dec_*      as enc_*          decoder LSTM
W_att      (S, K, H, H)      attention maps W^(k), Snell Eqs. (1), (20)
N_W1/N_b1  (S, 2H, H)/(S,1,H) hidden layer of N (ReLU), Snell Eq. (2)
N_W2/N_b2  (S, H, V)/(S,1,V) output layer of N (softmax)
=========  ================  =========================================

The classifier of Sec. 2.4 is bidirectional as in App. A.8 ("1 layer
bidirectional LSTM"): ``emb_src``, a forward ``enc_*`` and a backward ``bwd_*``
LSTM, ``h_l = [forward_l, backward_l]`` (2H), and ``w`` (S, 2H), the final
linear map of Snell Eq. (8). Initialisation follows ``torch.nn``
(uniform in :math:`\pm 1/\sqrt{\text{fan}}`, embeddings standard normal); each
run is drawn from its own ``torch.Generator`` seeded by its ``init_seed``, and
each head ``W^(k)`` from a generator seeded by its ``head_seed``, so a run's
initial parameters do not depend on the other runs it is batched with.
"""

import math

import torch

HEAD_SEED_OFFSET = 1_000_003     # head generators never collide with model generators


def _uniform(gen, shape, fan):
    bound = 1.0 / math.sqrt(fan)
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def _lstm_init(gen, E, H, prefix):
    return {f"{prefix}_Wx": _uniform(gen, (E, 4 * H), H),
            f"{prefix}_Wh": _uniform(gen, (H, 4 * H), H),
            f"{prefix}_b": _uniform(gen, (1, 4 * H), H)}


def head_init(head_seed, hidden):
    """One attention map W^(k) (H, H), a function of ``head_seed`` alone."""
    gen = torch.Generator().manual_seed(HEAD_SEED_OFFSET + int(head_seed))
    return _uniform(gen, (hidden, hidden), hidden)


def _stack(per_run, dtype, device):
    return {k: torch.stack([p[k] for p in per_run]).to(device=device, dtype=dtype)
            .requires_grad_(True) for k in per_run[0]}


def init_seq2seq(init_seeds, head_seeds, n_vocab, hidden, embed=None,
                 dtype=torch.float32, device="cpu"):
    """Stacked seq2seq parameters for runs ``r`` (one per entry of ``init_seeds``).

    ``head_seeds[r]`` lists run r's K head seeds (K equal for all runs).
    """
    E, H, V = embed or hidden, hidden, n_vocab
    per_run = []
    for seed, heads in zip(init_seeds, head_seeds):
        gen = torch.Generator().manual_seed(int(seed))
        p = {"emb_src": torch.randn((V, E), generator=gen),
             "emb_tgt": torch.randn((V, E), generator=gen)}
        p.update(_lstm_init(gen, E, H, "enc"))
        p.update(_lstm_init(gen, E, H, "dec"))
        p.update({"N_W1": _uniform(gen, (2 * H, H), 2 * H),
                  "N_b1": _uniform(gen, (1, H), 2 * H),
                  "N_W2": _uniform(gen, (H, V), H), "N_b2": _uniform(gen, (1, V), H)})
        p["W_att"] = torch.stack([head_init(h, H) for h in heads])           # (K, H, H)
        per_run.append(p)
    return _stack(per_run, dtype, device)


def init_classifier(init_seeds, n_vocab, hidden, embed=None, dtype=torch.float32,
                    device="cpu"):
    """Stacked parameters of the Sec. 2.4 bidirectional classifier (uniform attention: no Q, v)."""
    E, H = embed or hidden, hidden
    per_run = []
    for seed in init_seeds:
        gen = torch.Generator().manual_seed(int(seed))
        p = {"emb_src": torch.randn((n_vocab, E), generator=gen)}
        p.update(_lstm_init(gen, E, H, "enc"))
        p.update(_lstm_init(gen, E, H, "bwd"))
        p["w"] = _uniform(gen, (2 * H,), 2 * H)
        per_run.append(p)
    return _stack(per_run, dtype, device)


def embed_tokens(emb, ids):
    """Per-seed lookup: emb (S, V, E), ids (S, B, L) -> (S, B, L, E)."""
    S = emb.shape[0]
    return emb[torch.arange(S, device=ids.device).view(S, 1, 1), ids]


def lstm(params, prefix, x, state=None):
    """A seed-batched unidirectional LSTM over x (S, B, L, E); returns (h (S, B, L, H), (h, c)).

    Gates as torch.nn.LSTM: i, f, g, o; c' = f c + i g; h' = o tanh(c').
    """
    Wx, Wh, b = params[f"{prefix}_Wx"], params[f"{prefix}_Wh"], params[f"{prefix}_b"]
    S, B, L, E = x.shape
    H = Wh.shape[1]
    xw = torch.baddbmm(b, x.reshape(S, B * L, E), Wx).view(S, B, L, 4 * H)  # all steps at once
    if state is None:
        zeros = x.new_zeros(S, B, H)
        state = (zeros, zeros)
    h, c = state
    outs = []
    for xw_t in xw.unbind(dim=2):      # unbind: its backward stacks, slicing would zero-fill
        gates = torch.baddbmm(xw_t, h, Wh)                                   # (S, B, 4H)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs, dim=2), (h, c)                                  # (S, B, L, H)


def attention(s, W_att, h, uniform=False):
    r"""Snell Eqs. (1), (20)-(21): per-head dot attention, contexts summed over heads.

    s (S, B, T, H) decoder states, W_att (S, K, H, H), h (S, B, L, H).
    Returns the summed context (S, B, T, H) and alpha (S, B, K, T, L).
    ``uniform=True`` freezes every alpha to 1/L (the beta^uf models of Sec. 3.2).
    """
    S, B, T, H = s.shape
    L, K = h.shape[2], W_att.shape[1]
    if uniform:
        alpha = h.new_full((S, B, K, T, L), 1.0 / L)
    else:
        q = torch.einsum("sbth,skhg->sbktg", s, W_att)                       # s_t^T W^(k)
        a = torch.einsum("sbktg,sblg->sbktl", q, h)                          # (S, B, K, T, L)
        alpha = torch.softmax(a, dim=-1)                                     # Snell Eq. (1)
    context = torch.einsum("sbktl,sblh->sbth", alpha, h)                     # sum_k c_t^(k)
    return context, alpha


def seq2seq_logits(params, src, tgt_in, uniform=False):
    """Output logits (S, B, T, V) and alpha (S, B, K, T, L), Snell Eqs. (1)-(2), (20)-(21).

    The decoder starts from the encoder's last state (App. A.8) and reads the
    previous target word (teacher forcing, ``tgt_in`` begins with the start id 0).
    """
    h, state = lstm(params, "enc", embed_tokens(params["emb_src"], src))     # (S, B, L, H)
    s, _ = lstm(params, "dec", embed_tokens(params["emb_tgt"], tgt_in), state)
    context, alpha = attention(s, params["W_att"], h, uniform)
    S, B, T, H = s.shape
    z = torch.cat([context, s], dim=-1).reshape(S, B * T, 2 * H)             # [c_t, s_t]
    hidden = torch.relu(torch.baddbmm(params["N_b1"], z, params["N_W1"]))
    logits = torch.baddbmm(params["N_b2"], hidden, params["N_W2"])           # (S, B*T, V)
    return logits.view(S, B, T, -1), alpha


def seq2seq_loss(params, src, tgt, uniform=False):
    """Per-seed batch mean of Snell Eq. (3) (sum of token NLLs) and per-seed token accuracy.

    src, tgt (S, B, L) int64. Returns loss (S,) and accuracy (S,).
    """
    tgt_in = torch.cat([torch.zeros_like(tgt[..., :1]), tgt[..., :-1]], dim=-1)
    logits, _ = seq2seq_logits(params, src, tgt_in, uniform)
    logp = torch.log_softmax(logits, dim=-1)                                 # stable at 1e4
    nll = -logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)                    # (S, B, T)
    acc = (logits.argmax(-1) == tgt).double().mean(dim=(1, 2))
    return nll.sum(-1).mean(-1), acc


def classifier_position_logits(params, x):
    r"""Per-position logits :math:`W^T h_l` (S, B, L) of the Sec. 2.4 classifier, Snell Eq. (8).

    :math:`h_l` joins the forward state (words 1..l) and the backward state (words l..L).
    """
    e = embed_tokens(params["emb_src"], x)                                   # (S, B, L, E)
    h_fwd, _ = lstm(params, "enc", e)                                        # (S, B, L, H)
    h_bwd = lstm(params, "bwd", e.flip(2))[0].flip(2)                        # (S, B, L, H)
    return torch.einsum("sblh,sh->sbl", torch.cat([h_fwd, h_bwd], -1), params["w"])


def classifier_loss(params, x, y):
    r"""Uniform-attention classifier, Snell Eq. (8):
    :math:`p^{pos} = \sigma(\frac1L \sum_l W^T h_l)`.

    Returns per-seed mean binary cross-entropy (S,) and accuracy (S,).
    """
    logit = classifier_position_logits(params, x).mean(-1)                  # alpha_l = 1/L
    yf = y.to(logit.dtype)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logit, yf, reduction="none")
    acc = ((logit > 0).to(y.dtype) == y).double().mean(-1)
    return bce.mean(-1), acc


def keyword_gammas(params, x, y, l_star):
    r"""Sec. 6.1 log-odds :math:`\gamma_l = (2y-1) W^T h_l` on positives, averaged per seed.

    Returns a dict of (S,) tensors: ``lstar`` (:math:`\gamma_{l^*}`), ``lstar_next``
    (:math:`\gamma_{l^*+1}`, over positives with :math:`l^* < L`), ``mean``
    (:math:`\bar\gamma`) and ``last`` (:math:`\gamma_L`).
    """
    sign = (2 * y - 1).to(params["w"].dtype).unsqueeze(-1)                    # (S, B, 1)
    gamma = classifier_position_logits(params, x) * sign                     # (S, B, L)
    S, B, L = gamma.shape
    pos = (y == 1).to(gamma.dtype)                                           # (S, B)
    ls = l_star.clamp(min=0)
    at = gamma.gather(-1, ls.unsqueeze(-1)).squeeze(-1)
    nxt = gamma.gather(-1, (ls + 1).clamp(max=L - 1).unsqueeze(-1)).squeeze(-1)
    has_next = pos * (l_star < L - 1).to(gamma.dtype)

    def avg(v, m):
        return (v * m).sum(-1) / m.sum(-1).clamp(min=1)
    return {"lstar": avg(at, pos), "lstar_next": avg(nxt, has_next),
            "mean": avg(gamma.mean(-1), pos), "last": avg(gamma[..., -1], pos)}
