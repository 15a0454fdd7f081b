r"""Evaluation of the LSTM attention models: performance, alpha, probes beta and saliency Delta.

Snell et al. (2021), Sections 2.2, 2.4, 3.1 and 5.1. For every example of a
split, :func:`evaluate` returns (T_n, L_n) arrays (classification: T_n = 1)
of the attention alpha (Snell Eqs. (1), (7)), the lexical probe beta
(Snell Eqs. (4), (9)) and the gradient saliency Delta, together with the
performance (accuracy, or teacher-forced token accuracy and greedy-decoding
BLEU for translation).

Saliency (Section 5.1, after Ebrahimi et al., 2018). We use the first-order
(gradient x input) form

.. math:: \Delta_{t,l} = \nabla_{e_l} \log p_t[y_t] \cdot e_l,

the Taylor estimate of how much the log-probability of the correct output
drops when the embedding of word :math:`x_l` is removed (set to zero). HotFlip
scores a replacement of :math:`x_l` by a word j by :math:`(e_j - e_l)\cdot\nabla`;
with no particular replacement word, removal (:math:`e_j = 0`) is the natural
choice, and it keeps the sign: Delta is large where a word *supports* the
correct output, which is what beta measures, so A(Delta, beta^uf) compares
like with like (the gradient norm would rank words that hurt the prediction
as high as words that help it).
"""

import numpy as np
import torch

from minimal_attn.backends.snell.attention_losses import chunk_size, token_loss
from minimal_attn.backends.snell.batches import SeqBatch

BOS, EOS = 1, 2
#: Sentences a greedy-decoding batch holds on a GPU (on the CPU: the evaluation batch)
DECODE_BATCH = 256


def pad_batch(seqs, pad_id, device, prefix=None):
    """(B, L) long tensor of ``seqs`` padded with ``pad_id`` and their lengths (B,)."""
    seqs = [np.concatenate([[prefix], s]) if prefix is not None else s for s in seqs]
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    x = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        x[i, :len(s)] = torch.as_tensor(np.asarray(s, dtype=np.int64))
    return x.to(device), lengths.to(device)


def translate_batch(task, src, tgt, device):
    """Encoder ids, lengths, decoder inputs (<s> y_1 .. y_{T-1}) and targets y (B, T)."""
    x, lengths = pad_batch(src, task.pad_id, device)
    y_in, _ = pad_batch([t[:-1] for t in tgt], task.pad_id, device, prefix=BOS)
    y, y_len = pad_batch(tgt, task.pad_id, device)
    return x, lengths, y_in, y, y_len


def list_batch(task, src, tgt, device):
    """A :class:`.batches.SeqBatch` of lists of id arrays, by :func:`pad_batch` (the readable
    route; the loops cut batches out of :class:`.batches.SplitTensors`, the same tensors)."""
    if task.task == "classify":
        x, lengths = pad_batch(src, task.pad_id, device)
        y = torch.tensor([int(t[0]) for t in tgt], device=device, dtype=torch.float32)
        return SeqBatch(x, lengths.cpu(), y, None, None)
    x, lengths, y_in, y, y_len = translate_batch(task, src, tgt, device)
    return SeqBatch(x, lengths.cpu(), y, y_in, y_len)


def loss_on_batch(model, task, src, tgt, device, paradigm="sa"):
    """:func:`batch_loss` of the pairs ``src``, ``tgt`` (lists of id arrays)."""
    return batch_loss(model, task, list_batch(task, src, tgt, device), paradigm)


def batch_loss(model, task, b, paradigm="sa"):
    """Training loss: batch mean of the summed NLL of Snell Eq. (3) (BCE: Snell Eq. (8)).

    ``b`` a :class:`.batches.SeqBatch`; ``paradigm`` ``ha`` or ``lv`` replaces each
    token's NLL by V&R's HA or LV loss over the source positions (:mod:`.attention_losses`).
    """
    x, lengths, y = b.x, b.lengths, b.y
    if task.task == "classify":
        out = model(x, lengths)
        if paradigm == "sa":
            return torch.nn.functional.binary_cross_entropy_with_logits(out["logit"], y)
        return token_loss(paradigm, out["log_alpha"],                   # gamma, log_alpha
                          model.position_log_lik(out, y.long())).mean()
    y = y.clamp(max=task.n_vocab - 1)
    valid = torch.arange(y.shape[1], device=y.device)[None, :] < b.y_len[:, None]   # (B, T)
    if paradigm == "sa":
        out = model(x, lengths, b.y_in, rule="sa")
        nll = -out["logp"].gather(-1, y[..., None]).squeeze(-1)
    else:
        out = model(x, lengths, b.y_in, rule="none")
        nll = token_loss(paradigm, out["log_alpha"], model.position_log_lik(out, y))  # (B, T)
    return (nll * valid).sum() / x.shape[0]


def _saliency(model, task, x, lengths, y, y_in=None, tiled=None):
    """Delta (B, T, L): grad of log p_t[y_t] w.r.t. the embeddings, dotted with them.

    Translation needs one gradient per target word t. ``tiled`` (default: on a GPU) takes
    them from copies of the batch, copy j backing word t_j, in one backward per group of
    copies (:func:`_saliency_tiled`): more arithmetic, T times fewer passes of launches.
    """
    if task.task == "translate" and (x.device.type == "cuda" if tiled is None else tiled):
        return _saliency_tiled(model, task, x, lengths, y, y_in)
    emb = model.embed(x).detach().requires_grad_(True)                   # (B, L, E)
    with torch.backends.cudnn.flags(enabled=False):   # cuDNN's LSTM backward needs train mode
        if task.task == "classify":
            out = model(x, lengths, emb=emb)
            sign = (2 * y - 1).to(out["logit"].dtype)
            logp = torch.nn.functional.logsigmoid(sign * out["logit"])[:, None]   # (B, 1)
        else:
            positional = model.rule != "sa"
            out = model(x, lengths, y_in, emb=emb, rule="none" if positional else None)
            y = y.clamp(max=task.n_vocab - 1)
            if positional:
                return _saliency_by_chunks(model, out, y, emb)
            logp = out["logp"].gather(-1, y[..., None])[..., 0]
        delta = []
        for t in range(logp.shape[1]):    # examples are independent: one backward per t
            (g,) = torch.autograd.grad(logp[:, t].sum(), emb, retain_graph=True)
            delta.append((g * emb).sum(-1))                              # (B, L)
    return torch.stack(delta, 1)                                         # (B, T, L)


def _saliency_by_chunks(model, out, y, emb):
    """:func:`_saliency` of an HA or LV model: log p_t[y_t] (its rule over the (B, T, L, V)
    per-position distributions) one chunk of target words at a time, each chunk a graph of
    its own. Taken over all words at once, the chunks would be checkpointed and every
    word's backward would recompute all of them (T times the forward: an LV translation's
    last evaluation took 55 of its 67 s); here each chunk is computed once."""
    B, L = out["h"].shape[:2]
    chunk = chunk_size(B * L * (model.N2.out_features + model.N1.out_features),
                       out["h"].element_size(), device=out["h"].device)
    delta = []
    for t0 in range(0, y.shape[1], chunk):
        part = slice(t0, t0 + chunk)         # at most one chunk: map_positions keeps it whole
        logp = model.infer_logp(out["h"], out["s"][:, part], out["log_alpha"][:, part],
                                model.rule).gather(-1, y[:, part, None])[..., 0]
        for t in range(logp.shape[1]):
            (g,) = torch.autograd.grad(logp[:, t].sum(), emb, retain_graph=True)
            delta.append((g * emb).sum(-1))                              # (B, L)
    return torch.stack(delta, 1)                                         # (B, T, L)


def _saliency_tiled(model, task, x, lengths, y, y_in, max_rows=512):
    """:func:`_saliency` of translation from k copies of the batch at a time (k B <= max_rows
    rows): copy j's only loss is log p_{t0+j}[y], so its embeddings' gradient is that word's.
    """
    B, T = y.shape
    k_max = max(1, max_rows // B)
    y = y.clamp(max=task.n_vocab - 1)
    parts = []
    with torch.backends.cudnn.flags(enabled=False):   # cuDNN's LSTM backward needs train mode
        for t0 in range(0, T, k_max):
            k = min(k_max, T - t0)
            xr = x.repeat(k, 1)                                          # (k B, L)
            emb = model.embed(xr).detach().requires_grad_(True)          # (k B, L, E)
            out = model(xr, lengths.repeat(k), y_in.repeat(k, 1), emb=emb)
            logp = out["logp"].gather(-1, y.repeat(k, 1)[..., None])[..., 0].view(k, B, T)
            j = torch.arange(k, device=x.device)
            (g,) = torch.autograd.grad(logp[j, :, t0 + j].sum(), emb)    # copy j: word t0 + j
            parts.append((g * emb).sum(-1).view(k, B, -1).transpose(0, 1))   # (B, k, L)
    return torch.cat(parts, 1)                                           # (B, T, L)


def _target_lengths(split, n):
    """(n,) target lengths of the first ``n`` examples (classification: 1 each)."""
    return np.ones(n, dtype=np.int64) if split.task == "classify" else split.tgt_len[:n]


def length_order(split, n):
    """The first ``n`` examples of ``split`` ordered by T_n L_n, the size of their (T, L)
    arrays (stable, so equal sizes keep their order).

    A batch is padded to its longest source and target, and the probe beta computes all
    8,000 outputs at every padded (t, l): in the split's own order, the Multi30k
    validation batches of 32 hold 3.5x the (t, l) positions of their sentences, sorted
    1.5x. Every example's rows are its own whatever batch it sits in."""
    return np.argsort(_target_lengths(split, n) * split.src_len[:n], kind="stable")


def _host_rows(parts, split, order):
    """Per-example (T_n, L_n) NumPy arrays of per-batch (B, T_b, L_b) device tensors holding
    the examples ``order`` one after another: the batches padded to one shape and read
    back in one copy (not one a batch), then each row put back at its example's place."""
    T = max(p.shape[1] for p in parts)
    L = max(p.shape[2] for p in parts)
    whole = torch.cat([torch.nn.functional.pad(p.detach(), (0, L - p.shape[2], 0, T - p.shape[1]))
                       for p in parts]).double().cpu().numpy()            # (n, T, L)
    t_len = _target_lengths(split, len(order))
    rows = [None] * len(order)
    for k, i in enumerate(order):
        rows[i] = whole[k, :t_len[i], :split.src_len[i]]
    return rows


def evaluate(model, task, split, n=None, want_beta=True, want_delta=False, bleu=False,
             batch_size=32):
    """Performance and per-example (T_n, L_n) arrays ``alpha``, ``beta``, ``delta``.

    On the first ``n`` (None: all) examples of ``split``, a :class:`.batches.SplitTensors`,
    in batches of ``batch_size`` of like lengths (:func:`length_order`); the counts and
    arrays stay on the device until the end. Greedy decoding (``bleu``) keeps the split's
    order, on which its length caps depend.

    Returns
    -------
    dict with ``perf`` (accuracy / token accuracy in [0, 1]), ``bleu`` (in [0, 1]
    or None), ``alpha`` and, when asked for, ``beta`` and ``delta`` (lists of arrays)
    """
    n = len(split) if n is None else min(n, len(split))
    was_training = model.training
    model.eval()
    parts = {"alpha": [], "beta": [], "delta": []}
    hits, total, hyps = 0, 0, []
    order = length_order(split, n)          # batches of like lengths: less padding
    for start in range(0, n, batch_size):
        b = split.batch(order[start:start + batch_size])
        x, lengths, y_in = b.x, b.lengths, b.y_in
        with torch.no_grad():
            if task.task == "classify":
                y = b.y.long()
                out = model(x, lengths)
                hits = hits + ((out["logit"] > 0).long() == y).sum()
                total += x.shape[0]
                alpha, beta = out["alpha"][:, None], model.probe(out, y)[:, None]
            else:
                y = b.y
                out = model(x, lengths, y_in)
                valid = torch.arange(y.shape[1], device=y.device)[None, :] < b.y_len[:, None]
                hits = hits + ((out["logp"].argmax(-1) == y) & valid).sum()
                total = total + valid.sum()
                alpha = out["alpha"]
                beta = model.probe(out, y.clamp(max=task.n_vocab - 1)) if want_beta else None
        parts["alpha"].append(alpha)
        if want_beta:
            parts["beta"].append(beta)
        if want_delta:
            parts["delta"].append(_saliency(model, task, x, lengths, y, y_in))
    if bleu and task.task == "translate":
        # greedy decoding launches a few kernels per word and batch: on a GPU in bigger batches
        hyps = greedy_hyps(model, split, n, batch_size, batch_size
                           if split.x.device.type == "cpu" else max(batch_size, DECODE_BATCH))
    model.train(was_training)
    result = {"perf": int(hits) / max(int(total), 1), "bleu": None, "alpha": []}
    result.update({k: _host_rows(p, split, order) for k, p in parts.items() if p})
    if bleu and task.task == "translate":
        result["bleu"] = corpus_bleu([task.decode(h) for h in hyps], split.references(task, n))
    return result


def greedy_hyps(model, split, n, batch_size, step):
    """Greedy decodings (id lists) of the first ``n`` sources of ``split``, ``step`` at a time,
    each as long as decoding it in evaluation batches of ``batch_size`` allows (at most
    2 L + 10 ids, L the longest source of that batch), so the result is the same for every
    ``step``."""
    lengths = split.src_len[:n]
    starts = np.arange(0, n, batch_size)
    cap = np.repeat(2 * np.maximum.reduceat(lengths, starts) + 10,
                    np.diff(np.append(starts, n)))                     # (n,) per sentence
    hyps = []
    for start in range(0, n, step):
        stop = min(start + step, n)
        b = split.batch(np.arange(start, stop))
        hyps += [h[:c] for h, c in zip(model.greedy(b.x, b.lengths, BOS, EOS,
                                                    max_len=int(cap[start:stop].max())),
                                       cap[start:stop])]
    return hyps


def corpus_bleu(hyps, refs):
    """Corpus BLEU in [0, 1] with sacrebleu's defaults; None when sacrebleu is absent."""
    try:
        import sacrebleu
    except ImportError:
        return None
    # force: some Multi30k references end in " ." already; score them as they are
    return float(sacrebleu.corpus_bleu(hyps, [refs], force=True).score) / 100.0
