r"""Everything one row of Table 2 of Snell et al. (2021) needs, run or reused from a folder.

:func:`run_agreement` loads a data set (:mod:`minimal_attn.datasets.seq`), trains
(or continues, or reuses) four models with :func:`.train.train_seq`:

* ``standard``: learned attention, seed s (alpha, beta, Delta at the end);
* ``second``: learned attention, seed s + 1 (the checkpoints of Snell Eq. (11));
* ``uniform``: uniform attention (beta^uf at every checkpoint, A.7);
* ``frozen``: classification only, everything but the attention frozen (A.6);

``paradigm`` (sa, ha, lv, hybrid; :mod:`.attention_losses`) trains the standard
and second models; the uniform and frozen ones stay SA, so beta^uf is the same
reference for every paradigm;

fits the proxy of Snell Eqs. (5)-(6) (:mod:`minimal_attn.proxy`) and, for
classification, the logistic proxy of Snell Eq. (55) on the same token ids, and
assembles the table with :mod:`minimal_attn.experiments.agreement_table`. Outputs in
``out_dir``: ``agreement.json``, ``table.md``, ``table.csv``,
``agreement_curves.png`` and one folder per model under ``runs/``.
"""

import os
from dataclasses import asdict, replace

import numpy as np

from minimal_attn import logistic_proxy, proxy
from minimal_attn._proxy_fast import beta_px_rows
from minimal_attn.backends.snell.config import AgreementConfig  # noqa: F401 (re-exported)
from minimal_attn.backends.snell.inputs import check_embeddings, check_int, check_run
from minimal_attn.backends.snell.train import (
    SeqTrainConfig,
    load_rows,
    load_run,
    save_rows,
    train_seq,
)
from minimal_attn.backends.torch_backend import get_device
from minimal_attn.datasets.seq import load_text_task
from minimal_attn.experiments import agreement_table
from minimal_attn.experiments.checkpoints import data_fingerprint, load_guarded
from minimal_attn.experiments.io import (
    atomic_open,
    check_output_dir,
    ensure_dir,
    undo_on_refusal,
    write_csv,
    write_json,
    write_text,
)
from minimal_attn.experiments.progress import counter
from minimal_attn.experiments.resources import check_memory, check_steps

CACHES = ("proxy.npz", "logistic.npz")


def _read_cache(path):
    """The rows cached at ``path`` (None if absent); a damaged cache is refused in one line."""
    return load_guarded(path, load_rows, lambda r: None if "key" in r else "not a cache",
                        what="cached proxy", fix="delete it to fit the proxy again", prev=False)


def proxy_key(task, c):
    """What the cached proxies depend on: the token ids themselves (not only their counts)."""
    return data_fingerprint(data_fingerprint(task), task.info, c.proxy_d, c.proxy_epochs,
                            c.seed, c.train_eval)


def _cached_rows(path, key, compute):
    """``compute()`` saved at ``path`` with ``key``; reused when the key matches."""
    rows = _read_cache(path)
    if rows is not None and str(rows["key"]) == key:
        return rows
    rows = compute()
    save_rows(path, {**rows, "key": np.array(key)})
    return rows


def _splits(task, c):
    out = {"val": (task.val_src, task.val_tgt)}
    if c.train_eval:
        out["train"] = (task.train_src[:c.train_eval], task.train_tgt[:c.train_eval])
    return out


def _proxy_rows(task, c):
    """beta^px per pair of each split; the proxy trained in float64 on ``c.device`` (its
    dense Adam over the (|I|, d) embeddings is the bulk of the work)."""
    import torch

    device = get_device(c.device, param="device")
    like_array = None if device.type == "cpu" else torch.zeros(0, dtype=torch.float64,
                                                               device=device)
    params, _ = proxy.train_proxy(task.train_src, task.train_tgt, task.n_vocab, task.n_out,
                                  proxy.ProxyConfig(d=c.proxy_d, epochs=c.proxy_epochs,
                                                    seed=c.seed),
                                  val=(task.val_src, task.val_tgt), like_array=like_array)
    # = [proxy.beta_px(params, x, y) for x, y in pairs], in one gather
    return {f"{name}_beta_px": beta_px_rows(params, *pairs)
            for name, pairs in _splits(task, c).items()}


def _logistic_args(task):                    # of logistic_proxy.fit_logistic_sweep
    return (task.train_src, [int(t[0]) for t in task.train_tgt], task.val_src,
            [int(t[0]) for t in task.val_tgt], task.n_vocab)


def _start_logistic(task, c, path, key, background=None):
    """The logistic sweep (host-side L-BFGS) started in a child process to run while the
    models train, by default only on a GPU (on the CPU it competes): its pool (terminate
    it when done) and pending result; None when not needed or cached."""
    rows = _read_cache(path) if c.task == "classify" and c.logistic else None
    if not (c.task == "classify" and c.logistic) or (rows is not None and str(rows["key"]) == key) \
            or not (get_device(c.device).type != "cpu" if background is None else background):
        return None
    import multiprocessing

    pool = multiprocessing.get_context("spawn").Pool(1)
    return pool, pool.apply_async(logistic_proxy.fit_logistic_sweep, _logistic_args(task))


def _logistic_rows(task, c, started=None):
    """beta^log rows of each split; ``started``: :func:`_start_logistic`'s, if any."""
    try:
        fit = started[1].get() if started is not None else None
    except Exception:                        # redone below, to raise as itself
        fit = None
    B, info = fit or logistic_proxy.fit_logistic_sweep(*_logistic_args(task))
    rows = {f"{name}_beta_log": [logistic_proxy.beta_log(B, x, t) for x, t in zip(*pairs)]
            for name, pairs in _splits(task, c).items()}
    return {**rows, "lambda": np.array(info["lambda"]),
            "val_accuracy": np.array(info["val_accuracy"])}


def prepare(c, out_dir, proxy_too=False):
    """Check the options, load the data (before anything is written), then create ``out_dir``.

    Every model (and with ``proxy_too`` the proxy) is checked to fit in memory
    and finish before the first is trained. Returns the
    :class:`~minimal_attn.datasets.seq.TextTask` and the resolved base
    :class:`SeqTrainConfig`; a new SentencePiece model is saved as ``out_dir/spm.model``.
    """
    check_int("proxy_epochs", c.proxy_epochs, 1)
    check_int("proxy_d", c.proxy_d, 1)
    check_int("vocab_size", c.vocab_size, 4)
    get_device(c.device, param="device")
    base = SeqTrainConfig(task=c.task, steps=c.steps, batch_size=c.batch_size, lr=c.lr,
                          hidden=c.hidden, emb=c.emb, out_hidden=c.out_hidden,
                          lr_schedule=c.lr_schedule, warmup=c.warmup, clip=c.clip,
                          dropout=c.dropout,
                          eval_every=c.eval_every, seed=c.seed, bleu=c.bleu,
                          train_eval=c.train_eval, device=c.device, paradigm=c.paradigm,
                          switch_step=c.switch_step).resolved()
    if c.embeddings is not None:
        check_embeddings(c.embeddings, base.emb if c.task == "classify" else base.hidden)
    check_output_dir(out_dir)
    spm_file = os.path.join(out_dir, "spm.model")
    task = load_text_task(c.task, c.dataset, c.data_dir, c.max_train, c.max_val, c.vocab_size,
                          model_file=spm_file if os.path.exists(spm_file) else None,
                          max_len=c.max_len)
    check_run(task, base)
    if proxy_too:
        for name in CACHES:                   # refused now, not after training every model
            _read_cache(os.path.join(out_dir, name))
        batch = proxy.ProxyConfig().batch_size
        check_memory(proxy.proxy_bytes(task.n_vocab, task.n_out, len(task.val_src), c.proxy_d,
                                       batch),
                     f"the proxy model (d = {c.proxy_d}, {task.n_vocab} words)", param="proxy_d")
        check_steps(c.proxy_epochs * -(-len(task.train_src) // batch), "training the proxy",
                    param="proxy_epochs")
    ensure_dir(out_dir)
    if task.tokenizer_model is not None and not os.path.exists(spm_file):
        with atomic_open(spm_file, "wb") as f:
            f.write(task.tokenizer_model)
    return task, base


def train_one(config, attention, out_dir, progress=None, log=None):
    """Train (or continue) one model of ``config`` with ``attention`` in ``out_dir``.

    ``progress`` as in ``train_seq`` (the task is named ``attention``); ``log(line)`` warnings.
    Returns its result dict. A run refused midway (it diverged) leaves ``out_dir`` as it was.
    """
    with undo_on_refusal(out_dir):
        task, base = prepare(config, out_dir)
        return train_seq(task, replace(base, attention=attention), out_dir, progress=progress,
                         embeddings=config.embeddings, log=log, label=attention)


def run_agreement(config, out_dir, progress=None, log=None):
    """Run or reuse every model of one row, then write the table; returns agreement.json's dict.

    ``progress(label, done, total, note)``: every step of each model, the label
    naming it (standard, second, uniform, frozen, proxy, logistic; see
    :mod:`minimal_attn.experiments.progress`); ``log(line)``: warnings. A run
    refused midway (a model diverged, a file it reads back is unreadable) leaves
    ``out_dir`` as it found it.
    """
    with undo_on_refusal(out_dir):
        return _run_agreement(config, out_dir, progress, log)


def _run_agreement(c, out_dir, progress, log):
    task, base = prepare(c, out_dir, proxy_too=True)
    logistic = _start_logistic(task, c, os.path.join(out_dir, "logistic.npz"),
                               proxy_key(task, c))
    try:
        # the paradigm trains the models whose alpha is compared; beta^uf and the frozen beta
        # stay Snell's SA probes of the data, so every paradigm is compared with the same ones
        snell = replace(base, paradigm="sa", switch_step=None)
        runs = {"standard": base, "second": replace(base, seed=c.seed + 1),
                "uniform": replace(snell, attention="uniform")}
        if c.task == "classify" and c.frozen:
            runs["frozen"] = replace(snell, attention="frozen")
        loaded = {}
        for name, rc in runs.items():
            folder = os.path.join(out_dir, "runs", name)
            train_seq(task, rc, folder, progress=progress,
                      embeddings=c.embeddings if rc.attention != "frozen" else None, log=log,
                      label=name)
            loaded[name] = load_run(folder)
        key = proxy_key(task, c)
        tick = counter(progress, "proxy", 1)
        tick(0)                                # the bar names the model while it is fitted
        px = _cached_rows(os.path.join(out_dir, "proxy.npz"), key, lambda: _proxy_rows(task, c))
        tick()
        lg = None
        if c.task == "classify" and c.logistic:
            tick = counter(progress, "logistic", 1)
            tick(0)
            lg = _cached_rows(os.path.join(out_dir, "logistic.npz"), key,
                              lambda: _logistic_rows(task, c, logistic))
            tick()
        result = assemble(c, task, loaded, px, lg)
        _write_outputs(out_dir, c.dataset, result, task)
        return result
    finally:
        if logistic is not None:
            logistic[0].terminate()              # done, or no longer wanted


def assemble(c, task, loaded, px, lg):
    """The rows of every variant (Tables 2, 3, 4/6, 7, 10, 11) and the agreement.json dict."""
    def row(split="val", metric="A", perf="perf"):
        return agreement_table.agreement_row(
            loaded["standard"], loaded["second"], loaded["uniform"], px[f"{split}_beta_px"],
            frozen=loaded.get("frozen"), beta_log=lg[f"{split}_beta_log"] if lg else None,
            metric=metric, split=split, perf=perf)
    variants = {"Table 2": row()}
    if c.kendall:
        variants["Table 3 (Kendall tau)"] = row(metric="tau")
    if c.task == "translate" and c.bleu:
        variants["Table 6 (BLEU)"] = row(perf="bleu")
    if c.train_eval:
        variants["Table 7 (training set)"] = row(split="train")
    main = variants["Table 2"]
    result = {k: main[k] for k in agreement_table.COLUMNS}
    result.update({k: v for k, v in main.items() if k not in result})
    result.update({"task": c.task, "dataset": c.dataset, "data": task.info,
                   "performance": "accuracy" if c.task == "classify" else "token accuracy",
                   "paper_row": dict(zip(agreement_table.COLUMNS, [
                       v / 100 for v in agreement_table.PAPER_TABLE2[
                           agreement_table.PAPER_NAME[c.dataset]]]))
                   if c.dataset in agreement_table.PAPER_NAME else None,
                   "variants": {k: {kk: vv for kk, vv in v.items() if kk != "curves"}
                                for k, v in variants.items() if k != "Table 2"},
                   "runs": {name: h for name, (h, _) in loaded.items()},
                   "config": asdict(c)})
    if lg is not None:
        result["logistic_lambda"] = float(lg["lambda"])
        result["logistic_val_accuracy"] = float(lg["val_accuracy"])
    result["_variants_full"] = variants
    return result


def _write_outputs(out_dir, dataset, result, task):
    variants = result.pop("_variants_full")
    write_text(os.path.join(out_dir, "table.md"),
               agreement_table.markdown_table(dataset, variants))
    rows = []
    for title, row in variants.items():
        rows += [[title] + r for r in agreement_table.table_rows(dataset, row, title == "Table 2")]
    write_csv(os.path.join(out_dir, "table.csv"),
              ["variant", "task"] + list(agreement_table.COLUMNS), rows)
    write_json(os.path.join(out_dir, "agreement.json"), _jsonable(result))
    from minimal_attn.experiments.plots import plot_agreement_curves
    plot_agreement_curves(result, os.path.join(out_dir, "agreement_curves.png"))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj
