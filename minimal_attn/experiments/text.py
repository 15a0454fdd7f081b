r"""``attn-dyn ibm1`` and ``attn-dyn proxy`` as library calls (Snell et al., 2021).

Snell et al. (2021), Sections 2.3 and 4: IBM Model 1 trained by EM (Brown et
al., 1993) on a parallel corpus, and the bag-of-words proxy model of Snell
Eq. (5) compared with IBM Model 1 by the agreement of Snell Eq. (10) on
held-out pairs (its probe, Snell Eq. (6), against Snell Eq. (18)).

>>> from minimal_attn.experiments.text import Ibm1Config, run_ibm1
>>> r = run_ibm1("train.en", "train.de", Ibm1Config(iterations=5))   # doctest: +SKIP
"""

import dataclasses
import os
from typing import Optional

import numpy as np

from minimal_attn.datasets.text import Vocab, read_parallel, tokenize, whitespace_tokens
from minimal_attn.errors import InputError, check_int_at_least
from minimal_attn.experiments.progress import counter
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.proxy import ProxyConfig, check_proxy_config

TOKENIZERS = {"simple": tokenize, "whitespace": whitespace_tokens}


# ------------------------------------------------------------------ IBM Model 1
@dataclasses.dataclass
class Ibm1Config:
    """What ``attn-dyn ibm1`` trains."""

    iterations: int = 5     # EM iterations from the uniform table t(o|i) = 1/|O|
    null: bool = True       # add the NULL source word (Brown et al.'s e_0)


def run_ibm1(src_path, tgt_path, cfg=None, progress=None):
    """Read whitespace-tokenised, lower-cased parallel files and train IBM Model 1.

    ``progress(label, done, total, note)`` hears of each EM iteration (task
    ``EM``, the log-likelihood as note; :mod:`.progress`).

    Returns
    -------
    dict with ``model`` (:class:`~minimal_attn.ibm1.IBM1Model`), ``src_vocab``,
    ``tgt_vocab`` (:class:`~minimal_attn.datasets.text.Vocab`), ``pairs``, ``target_words``.
    """
    from minimal_attn.ibm1 import train_ibm1

    cfg = _settings(cfg, Ibm1Config)
    check_int_at_least("iterations", cfg.iterations, 1, param="iterations")
    check_steps(cfg.iterations, "EM", param="iterations")
    tick = counter(progress, "EM", cfg.iterations)
    src_tok, tgt_tok = read_parallel(src_path, tgt_path, whitespace_tokens)
    src_vocab, tgt_vocab = Vocab.build(src_tok, unk=False), Vocab.build(tgt_tok, unk=False)
    model = train_ibm1(src_vocab.encode_all(src_tok), tgt_vocab.encode_all(tgt_tok),
                       len(src_vocab), len(tgt_vocab), iterations=cfg.iterations,
                       null=cfg.null,
                       callback=lambda k, ll: tick(note=f"log-likelihood {ll:.2f}"))
    return {"model": model, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab,
            "pairs": len(src_tok), "target_words": sum(len(t) for t in tgt_tok)}


def ibm1_tsv(result):
    """``source<TAB>target<TAB>probability`` for every non-zero entry; NULL as ``<NULL>``."""
    from minimal_attn.ibm1 import NULL_WORD

    model = result["model"]
    names = list(result["src_vocab"].itos) + ([NULL_WORD] if model.null else [])
    tgt = result["tgt_vocab"].itos
    s, t, p = model.entries()
    return "".join(f"{names[i]}\t{tgt[o]}\t{q!r}\n"
                   for i, o, q in zip(s.tolist(), t.tolist(), p.tolist()))


def ibm1_report(result):
    """``{"pairs", "source_vocab", "target_vocab", "null", "target_words", "iterations",
    "log_likelihood", "entries"}``: everything but the table, JSON-ready."""
    model = result["model"]
    return {"pairs": result["pairs"], "source_vocab": len(result["src_vocab"]),
            "target_vocab": len(result["tgt_vocab"]), "null": model.null,
            "target_words": result["target_words"],
            "iterations": len(model.log_likelihood) - 1,
            "log_likelihood": [float(v) for v in model.log_likelihood],
            "entries": int(len(model.entries()[2]))}


def ibm1_summary(result):
    r = ibm1_report(result)
    lines = [f"{r['pairs']} pairs, {r['source_vocab']} source and {r['target_vocab']} target "
             f"words, NULL {'on' if r['null'] else 'off'}",
             f"  {'iteration':>9s} {'log-likelihood':>16s} {'per target word':>16s}"]
    lines += [f"  {k:9d} {ll:16.4f} {ll / r['target_words']:16.6f}"
              for k, ll in enumerate(r["log_likelihood"])]
    return "\n".join(lines)


# ------------------------------------------------------------------ the proxy model
@dataclasses.dataclass
class ProxyExperiment:
    """What ``attn-dyn proxy`` runs beside the proxy's own training settings."""

    model: ProxyConfig = dataclasses.field(default_factory=ProxyConfig)  # d, epochs, lr, ...
    holdout: float = 0.1            # without validation files: hold out this last fraction
    max_pairs: Optional[int] = None  # use only the first N training pairs
    tokenizer: str = "simple"       # simple (words and punctuation) or whitespace
    min_count: int = 2              # rarer training words become <unk>
    ibm_iterations: int = 1         # EM iterations (no NULL) for beta^IBM; 1 gives Trans
    percent: float = 5.0            # top percentage of Snell Eq. (10)


def _settings(cfg, kind):
    """``cfg``, or the defaults for None; anything but a ``kind`` (a dict of its fields) is
    refused here, not by an AttributeError half-way."""
    if cfg is None:
        return kind()
    if not isinstance(cfg, kind):
        name = kind.__name__
        raise InputError(f"cfg must be of type {name} (e.g. {name}(**settings)), got "
                         f"{type(cfg).__name__}", param="cfg")
    return cfg


def check_proxy(cfg):
    """Refuse bad settings before any file is read."""
    if cfg.max_pairs is not None:
        check_int_at_least("max_pairs", cfg.max_pairs, 2, param="max_pairs")
    for name in ("min_count", "ibm_iterations"):
        check_int_at_least(name, getattr(cfg, name), 1, param=name)
    check_proxy_config(cfg.model)                    # the proxy's own: d, lr, optimizer, ...
    check_int_at_least("epochs", cfg.model.epochs, 1, param="epochs")
    if not 0.0 < cfg.percent <= 100.0:
        raise InputError(f"percent must lie in (0, 100], got {cfg.percent}", param="percent")
    if not 0.0 < cfg.holdout < 1.0:
        raise InputError(f"holdout must lie strictly between 0 and 1, got {cfg.holdout}",
                         param="holdout")
    if cfg.tokenizer not in TOKENIZERS:
        raise InputError(f"tokenizer must be one of {', '.join(TOKENIZERS)}",
                         param="tokenizer")


def holdout_split(pairs, holdout):
    """(train, held out): the last ``round(holdout * N)`` pairs are held out."""
    n_val = int(round(holdout * len(pairs[0])))
    if n_val < 1 or n_val >= len(pairs[0]):
        raise InputError(f"cannot hold out {holdout:g} of {len(pairs[0])} pairs; give more "
                         "pairs, another holdout, or a validation pair (val_src and val_tgt)",
                         param=("holdout", "val_src", "val_tgt"))
    cut = len(pairs[0]) - n_val
    return (pairs[0][:cut], pairs[1][:cut]), (pairs[0][cut:], pairs[1][cut:])


def _read(src, tgt, val, cfg):
    tok = TOKENIZERS[cfg.tokenizer]
    train = read_parallel(src, tgt, tok)
    if cfg.max_pairs is not None:
        train = (train[0][:cfg.max_pairs], train[1][:cfg.max_pairs])
    if val is not None:
        return train, read_parallel(val[0], val[1], tok)
    return holdout_split(train, cfg.holdout)


def _vocab(sentences, min_count, side):
    vocab = Vocab.build(sentences, min_count=min_count)
    if len(vocab) < 2:
        raise InputError(f"no {side} word occurs min_count = {min_count} times in the "
                         "training pairs, so every word would be <unk>; lower min_count",
                         param="min_count")
    return vocab


def _check_proxy_memory(n_src, n_tgt, n_val, cfg):
    from minimal_attn.proxy import proxy_bytes

    d = cfg.model.d
    need = proxy_bytes(n_src, n_tgt, n_val, d, cfg.model.batch_size)
    check_memory(need, f"the proxy model (d = {d}, {n_src} + {n_tgt} words)",
                 param=("dim", "batch_size"))


def run_proxy(src, tgt, cfg=None, val=None, progress=None):
    """Train the proxy model and compare its probe with IBM Model 1 on held-out pairs.

    Parameters
    ----------
    src, tgt : paths of the line-aligned training files (the source predicts the target)
    cfg : ProxyExperiment
    val : (val_src, val_tgt) paths, or None to hold out ``cfg.holdout`` of the training pairs
    progress : ``progress(label, done, total, note)`` after each epoch (task ``proxy``,
        the validation loss as note; :mod:`.progress`)

    Returns
    -------
    dict: ``train_pairs``, ``heldout_pairs``, ``source_vocab``, ``target_vocab``,
    ``config``, ``ibm_iterations``, ``percent``, ``min_count``, ``history`` (per epoch:
    ``epoch``, ``train_loss``, ``val_loss``), ``agreement``, ``baseline``,
    ``kendall_tau``, ``n_words``.
    """
    from minimal_attn.agreement import average_agreement
    from minimal_attn.ibm1 import beta_ibm, train_ibm1
    from minimal_attn.proxy import beta_px, train_proxy

    cfg = _settings(cfg, ProxyExperiment)
    check_proxy(cfg)
    if val is not None and (isinstance(val, (str, bytes, os.PathLike)) or len(val) != 2):
        raise InputError(f"val must be a pair (val_src, val_tgt) of paths, got {val!r}",
                         param="val")
    (tr_src, tr_tgt), (va_src, va_tgt) = _read(src, tgt, val, cfg)
    src_vocab = _vocab(tr_src, cfg.min_count, "source")
    tgt_vocab = _vocab(tr_tgt, cfg.min_count, "target")
    n_src, n_tgt = len(src_vocab), len(tgt_vocab)
    _check_proxy_memory(n_src, n_tgt, len(va_src), cfg)
    check_steps(cfg.model.epochs * -(-len(tr_src) // cfg.model.batch_size),
                "training the proxy", param="epochs")
    check_steps(cfg.ibm_iterations, "EM", param="ibm_iterations")
    x_tr, y_tr = src_vocab.encode_all(tr_src), tgt_vocab.encode_all(tr_tgt)
    x_va, y_va = src_vocab.encode_all(va_src), tgt_vocab.encode_all(va_tgt)
    tick = counter(progress, "proxy", cfg.model.epochs)

    def watch(epoch, record):
        tick(note=f"val loss {record['val_loss']:.3f}" if "val_loss" in record else None)

    with np.errstate(over="ignore", invalid="ignore"):     # train_proxy refuses divergence
        params, history = train_proxy(x_tr, y_tr, n_src, n_tgt, cfg.model,
                                      val=(x_va, y_va), callback=watch)
    table = train_ibm1(x_tr, y_tr, n_src, n_tgt, iterations=cfg.ibm_iterations, null=False)
    b_px = [beta_px(params, x, y) for x, y in zip(x_va, y_va)]
    b_ibm = [np.asarray(beta_ibm(table, x, y)) for x, y in zip(x_va, y_va)]
    scores = average_agreement(b_px, b_ibm, percent=cfg.percent)
    return {"train_pairs": len(x_tr), "heldout_pairs": len(x_va), "source_vocab": n_src,
            "target_vocab": n_tgt, "config": dataclasses.asdict(cfg.model),
            "ibm_iterations": cfg.ibm_iterations, "percent": cfg.percent,
            "min_count": cfg.min_count, "history": history, **scores}


def proxy_summary(report):
    lines = [f"{report['train_pairs']} training and {report['heldout_pairs']} held-out pairs; "
             f"vocabularies {report['source_vocab']} source, {report['target_vocab']} target "
             f"(min count {report['min_count']})"]
    lines += [f"  epoch {r['epoch']:3d}  train loss {r['train_loss']:.4f}  "
              f"held-out loss {r['val_loss']:.4f}  (per output word)"
              for r in report["history"]]
    lines.append(f"A(beta^px, beta^IBM), top {report['percent']:g}%: "
                 f"{report['agreement']:.4f}  (random baseline {report['baseline']:.4f}) over "
                 f"{report['n_words']} output words")
    if report["kendall_tau"] is not None:
        lines.append(f"Kendall tau(beta^px, beta^IBM): {report['kendall_tau']:.4f}")
    return "\n".join(lines)
