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

from minimal_attn.backends.snell.attention_losses import (
    chunk_size,
    infer,
    over_target_chunks,
    token_loss,
)
from minimal_attn.backends.snell.seq_models import pick, position_logp

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
        alpha = torch.softmax(_scores(s, W_att, h), dim=-1)                  # Snell Eq. (1)
    context = torch.einsum("sbktl,sblh->sbth", alpha, h)                     # sum_k c_t^(k)
    return context, alpha


def _scores(s, W_att, h):
    q = torch.einsum("sbth,skhg->sbktg", s, W_att)                           # s_t^T W^(k)
    return torch.einsum("sbktg,sblg->sbktl", q, h)                           # (S, B, K, T, L)


def log_attention(s, W_att, h, uniform=False):
    """log alpha (S, B, T, L) of a one-head model, Snell Eq. (1) in log space."""
    if W_att.shape[1] != 1:
        raise ValueError("HA and LV need one attention head")
    if uniform:
        return h.new_full(s.shape[:3] + (h.shape[2],), -math.log(h.shape[2]))
    return torch.log_softmax(_scores(s, W_att, h)[:, :, 0], dim=-1)


def _states(params, src, tgt_in):
    """Encoder states h (S, B, L, H) and decoder states s (S, B, T, H)."""
    h, state = lstm(params, "enc", embed_tokens(params["emb_src"], src))     # (S, B, L, H)
    s, _ = lstm(params, "dec", embed_tokens(params["emb_tgt"], tgt_in), state)
    return h, s


def map_positions(params, h, s, fn, *per_t):
    """``fn(logp_pos, *chunks)`` over chunks of target tokens, concatenated along T (axis 2).

    ``logp_pos`` (S, B, T_c, L, V) = log N([h_l, s_t]), Snell Eq. (4), by
    :func:`.seq_models.position_logp`, the code of the lexical probe.
    """
    H = h.shape[-1]
    W1, W2 = params["N_W1"], params["N_W2"]                                  # (S, 2H, K), (S, K, V)
    h_in = torch.einsum("sblh,shk->sblk", h, W1[:, :H])                     # c's rows: h_l
    s_in = torch.einsum("sbth,shk->sbtk", s, W1[:, H:]) + params["N_b1"][:, None]

    def output(z):                                                           # (S, B, T, L, K)
        return torch.einsum("sbtlk,skv->sbtlv", z, W2) + params["N_b2"][:, None, None]
    S, B, L = h.shape[:3]
    chunk = chunk_size(S * B * L * (W2.shape[1] + W2.shape[2]), h.element_size(), device=h.device)
    return over_target_chunks(lambda s_c, *a: fn(position_logp(h_in, s_c, output), *a),
                              (s_in,) + tuple(per_t), 2, chunk)


def seq2seq_logits(params, src, tgt_in, uniform=False):
    """Output logits (S, B, T, V) and alpha (S, B, K, T, L), Snell Eqs. (1)-(2), (20)-(21).

    The decoder starts from the encoder's last state (App. A.8) and reads the
    previous target word (teacher forcing, ``tgt_in`` begins with the start id 0).
    """
    h, s = _states(params, src, tgt_in)
    context, alpha = attention(s, params["W_att"], h, uniform)
    S, B, T, H = s.shape
    z = torch.cat([context, s], dim=-1).reshape(S, B * T, 2 * H)             # [c_t, s_t]
    hidden = torch.relu(torch.baddbmm(params["N_b1"], z, params["N_W1"]))
    logits = torch.baddbmm(params["N_b2"], hidden, params["N_W2"])           # (S, B*T, V)
    return logits.view(S, B, T, -1), alpha


def seq2seq_loss(params, src, tgt, uniform=False, paradigm="sa"):
    """Per-seed batch mean of Snell Eq. (3) (sum of token NLLs) and per-seed token accuracy.

    src, tgt (S, B, L) int64. Returns loss (S,) and accuracy (S,). ``paradigm``
    (``sa``, ``ha``, ``lv``, or one of them per seed in a list) replaces each
    token's NLL by that loss (:mod:`.attention_losses`) and predicts by its
    inference rule; ``ha`` and ``lv`` need one head.
    """
    tgt_in = torch.cat([torch.zeros_like(tgt[..., :1]), tgt[..., :-1]], dim=-1)
    per_seed = [paradigm] * src.shape[0] if isinstance(paradigm, str) else list(paradigm)
    if set(per_seed) == {"sa"}:
        logits, _ = seq2seq_logits(params, src, tgt_in, uniform)
        logp = torch.log_softmax(logits, dim=-1)                             # stable at 1e4
        nll = -logp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)                # (S, B, T)
        acc = (logits.argmax(-1) == tgt).double().mean(dim=(1, 2))
        return nll.sum(-1).mean(-1), acc
    loss, acc = {}, {}
    for rule in sorted(set(per_seed)):
        loss[rule], acc[rule] = _paradigm_loss(params, src, tgt, tgt_in, uniform, rule)
    pick_seed = lambda d: torch.stack([d[r][i] for i, r in enumerate(per_seed)])  # noqa: E731
    return pick_seed(loss), pick_seed(acc)


def _paradigm_loss(params, src, tgt, tgt_in, uniform, rule):
    """Loss (S,) and accuracy (S,) of every seed under one paradigm ``rule``."""
    if rule == "sa":
        return seq2seq_loss(params, src, tgt, uniform)
    h, s = _states(params, src, tgt_in)
    log_alpha = log_attention(s, params["W_att"], h, uniform)                # (S, B, T, L)
    if torch.is_grad_enabled():     # a training step reads only the loss: skip the inference
        log_lik = map_positions(params, h, s, pick, tgt)                     # (S, B, T, L)
        loss = token_loss(rule, log_alpha, log_lik).sum(-1).mean(-1)         # (S,)
        return loss, torch.full_like(loss, float("nan"), dtype=torch.float64)

    def both(lp, y, la):      # the label's log-likelihoods and, as one more column, the
        # prediction of V&R Sec. 2.3's inference: argmax position (HA) or mixture (LV)
        pred = infer(rule, la, lp).argmax(-1, keepdim=True).to(lp.dtype)     # ids < 2^24
        return torch.cat([pick(lp, y), pred], -1)                            # (S, B, T_c, L + 1)
    out = map_positions(params, h, s, both, tgt, log_alpha)    # one pass over the positions
    loss = token_loss(rule, log_alpha, out[..., :-1]).sum(-1).mean(-1)       # (S,)
    acc = (out[..., -1].long() == tgt).double().mean(dim=(1, 2))
    return loss, acc


def seq2seq_focus(params, src, tgt, uniform=False):
    """Per-seed mean over tokens of max_l alpha_{t,l} (S,): 1/L uniform, 1 one-hot."""
    tgt_in = torch.cat([torch.zeros_like(tgt[..., :1]), tgt[..., :-1]], dim=-1)
    _, alpha = seq2seq_logits(params, src, tgt_in, uniform)                  # (S, B, K, T, L)
    return alpha.amax(-1).double().mean(dim=(1, 2, 3))


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


def keyword_gammas(params, x, y, l_star, sums=False):
    r"""Sec. 6.1 log-odds :math:`\gamma_l = (2y-1) W^T h_l` on positives, averaged per seed.

    Returns a dict of (S,) tensors: ``lstar`` (:math:`\gamma_{l^*}`), ``lstar_next``
    (:math:`\gamma_{l^*+1}`, over positives with :math:`l^* < L`), ``mean``
    (:math:`\bar\gamma`) and ``last`` (:math:`\gamma_L`). ``sums=True``: each entry is
    ``(sum, count)`` over the positives instead, so that batches add up exactly.
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
        if sums:
            return (v * m).sum(-1), m.sum(-1)
        return (v * m).sum(-1) / m.sum(-1).clamp(min=1)
    return {"lstar": avg(at, pos), "lstar_next": avg(nxt, has_next),
            "mean": avg(gamma.mean(-1), pos), "last": avg(gamma[..., -1], pos)}
