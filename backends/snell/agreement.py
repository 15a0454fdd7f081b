r"""Everything one row of Table 2 of Snell et al. (2021) needs, run or reused from a folder.

:func:`run_agreement` loads a data set (:mod:`minimal_attn.datasets.seq`), trains
(or continues, or reuses) four models with :func:`.train.train_seq`:

* ``standard``: learned attention, seed s (alpha, beta, Delta at the end);
* ``second``: learned attention, seed s + 1 (the checkpoints of Snell Eq. (11));
* ``uniform``: uniform attention (beta^uf at every checkpoint, A.7);
* ``frozen``: classification only, everything but the attention frozen (A.6);

``paradigm`` (sa, ha, lv, hybrid; :mod:`.attention_losses`) trains the standard
and second models; the uniform and frozen ones stay SA, so beta^uf is the same
reference for every paradigm; ``workers`` > 1 trains the models and fits the proxy
side by side in worker processes (:mod:`.workers`), with the same numbers;
``time_limit`` shares seconds of training out among the models
(:func:`model_time_limit`): a model past its share stops at its next evaluation,
and the row, assembled from where they stopped, says so (``time_limited``);

fits the proxy of Snell Eqs. (5)-(6) (:mod:`minimal_attn.proxy`) and, for
classification, the logistic proxy of Snell Eq. (55) on the same token ids
(:mod:`.row_proxies`), and assembles the table with
:mod:`minimal_attn.experiments.agreement_table`. Outputs in ``out_dir``:
``agreement.json``, ``table.md``, ``table.csv``, ``agreement_curves.png`` and one folder
per model under ``runs/``. agreement.json's ``seconds`` says where the wall time went
(:func:`.timing.seconds_line` puts it in one line): reading the data, each job (with its
process's start when ``workers`` > 1), the proxies, the whole row, and each
model's ``timing.json`` (:mod:`.timing`: setup, training steps, evaluations).
"""

import math
import os
import time
from dataclasses import asdict, replace

import numpy as np
import torch

from minimal_attn import proxy
from minimal_attn.backends.snell.config import AgreementConfig  # noqa: F401 (re-exported)
from minimal_attn.backends.snell.inputs import check_embeddings, check_int, check_run
from minimal_attn.backends.snell.row_proxies import (
    CACHES,
    LOGISTIC_RULE,
    cached_rows,
    logistic_rows,
    proxy_key,
    proxy_rows,
    read_cache,
)
from minimal_attn.backends.snell.run_files import load_run
from minimal_attn.backends.snell.timing import read_calls
from minimal_attn.backends.snell.train import SeqTrainConfig, train_seq
from minimal_attn.backends.snell.workers import run_jobs
from minimal_attn.backends.torch_backend import get_device, set_threads
from minimal_attn.datasets.seq import load_text_task
from minimal_attn.experiments import agreement_table
from minimal_attn.experiments.io import (
    atomic_open,
    check_output_dir,
    ensure_dir,
    staged_folder,
    undo_on_refusal,
    write_csv,
    write_json,
    write_text,
)
from minimal_attn.experiments.progress import counter
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.experiments.run_folders import check_run_folder


def check_options(c):
    """Check a row's options without reading any data: the resolved base
    :class:`SeqTrainConfig` of its models, or InputError (a sweep checks every row so)."""
    check_int("proxy_epochs", c.proxy_epochs, 1)
    check_int("workers", c.workers, 1)
    if c.threads is not None:
        check_int("threads", c.threads, 1)
    check_int("proxy_d", c.proxy_d, 1)
    check_int("vocab_size", c.vocab_size, 4)
    get_device(c.device, param="device")
    base = SeqTrainConfig(task=c.task, steps=c.steps, batch_size=c.batch_size, lr=c.lr,
                          hidden=c.hidden, emb=c.emb, out_hidden=c.out_hidden,
                          lr_schedule=c.lr_schedule, warmup=c.warmup, clip=c.clip,
                          dropout=c.dropout,
                          eval_every=c.eval_every, seed=c.seed, bleu=c.bleu,
                          train_eval=c.train_eval, device=c.device, paradigm=c.paradigm,
                          switch_step=c.switch_step, time_limit=c.time_limit).resolved()
    if c.embeddings is not None:
        check_embeddings(c.embeddings, *((base.emb, "emb") if c.task == "classify"
                                         else (base.hidden, "hidden")))
    return base


def prepare(c, out_dir, proxy_too=False):
    """Check the options, load the data (before anything is written), then create ``out_dir``.

    Every model (and with ``proxy_too`` the proxy) is checked to fit in memory
    and finish before the first is trained. Returns the
    :class:`~minimal_attn.datasets.seq.TextTask` and the resolved base
    :class:`SeqTrainConfig`; a new SentencePiece model is saved as ``out_dir/spm.model``.
    """
    base = check_options(c)
    check_output_dir(out_dir)
    spm_file = os.path.join(out_dir, "spm.model")
    task = load_text_task(c.task, c.dataset, c.data_dir, c.max_train, c.max_val, c.vocab_size,
                          model_file=spm_file if os.path.exists(spm_file) else None,
                          max_len=c.max_len)
    check_run(task, base)
    if proxy_too:
        for name in CACHES:                   # refused now, not after training every model
            read_cache(os.path.join(out_dir, name))
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
    check_run_folder(out_dir, "train-seq")          # not another command's run folder
    with undo_on_refusal(out_dir):
        task, base = prepare(config, out_dir)
        return train_seq(task, replace(base, attention=attention, threads=config.threads),
                         out_dir, progress=progress, embeddings=config.embeddings, log=log,
                         label=attention)


def run_agreement(config, out_dir, progress=None, log=None):
    """Run or reuse every model of one row, then write the table; returns agreement.json's dict.

    ``progress(label, done, total, note)``: every step of each model, the label
    naming it (standard, second, uniform, frozen, proxy, logistic; see
    :mod:`minimal_attn.experiments.progress`); ``log(line)``: warnings. A run
    refused midway (a model diverged, a file it reads back is unreadable) leaves
    ``out_dir`` as it found it.
    """
    check_run_folder(out_dir, "agreement")          # not another command's run folder
    with undo_on_refusal(out_dir):
        return _run_agreement(config, out_dir, progress, log)


def _run_agreement(c, out_dir, progress, log):
    began = time.perf_counter()
    set_threads(c.threads)
    task, base = prepare(c, out_dir, proxy_too=True)
    prepared = time.perf_counter()
    key = proxy_key(task, c)
    logistic_key = f"{key}/{LOGISTIC_RULE}"     # an older rule's cache is fitted again
    logistic = c.task == "classify" and c.logistic
    # the paradigm trains the models whose alpha is compared; beta^uf and the frozen beta
    # stay Snell's SA probes of the data, so every paradigm is compared with the same ones
    snell = replace(base, paradigm="sa", switch_step=None)
    runs = {"standard": base, "second": replace(base, seed=c.seed + 1),
            "uniform": replace(snell, attention="uniform")}
    if c.task == "classify" and c.frozen:
        runs["frozen"] = replace(snell, attention="frozen")
    share = model_time_limit(c.time_limit, len(runs) + (c.workers > 1), c.workers)
    jobs = {name: (_train_model, (c, out_dir, name, replace(rc, time_limit=share)),
                   rc.steps)
            for name, rc in runs.items()}
    if c.workers > 1:            # the proxy, the longest job on a CPU, first and beside
        jobs = {"proxy": (_fit_proxy, (c, out_dir, key), 1), **jobs}   # the models;
        if logistic:             # the logistic proxy's host-side L-BFGS last, beside them
            jobs["logistic"] = (_fit_logistic, (c, out_dir, logistic_key), 1)
    # each worker with its share of this process's threads (more oversubscribes a CPU:
    # 2 workers of 2 threads on 2 cores ran 4.7x slower than 1 after another)
    seconds = {"prepare": prepared - began,
               "jobs": run_jobs(jobs, c.workers, task, progress, log, label="models",
                                threads=max(1, torch.get_num_threads()
                                            // min(c.workers, len(jobs))))}
    after = time.perf_counter()
    seconds["all_jobs"] = after - prepared
    loaded = {name: load_run(os.path.join(out_dir, "runs", name)) for name in runs}
    px = _fit_proxy(c, out_dir, key, task=task, progress=progress)
    lg = _fit_logistic(c, out_dir, logistic_key, task=task, progress=progress) \
        if logistic else None
    seconds["proxies"] = time.perf_counter() - after
    result = assemble(c, task, loaded, px, lg)
    result["seconds"] = {**seconds, "models": {
        name: read_calls(os.path.join(out_dir, "runs", name)) for name in runs}}
    _write_outputs(out_dir, c.dataset, result, task, began)
    return result


def model_time_limit(time_limit, jobs, workers):
    """Each model's share of a row's ``time_limit`` (seconds; None: no limit).

    The row's ``jobs`` (its models, and the proxy when ``workers`` > 1) run
    ``min(workers, jobs)`` at a time, so each worker runs ``ceil(jobs / that)`` of
    them in turn, and each gets that fraction: the whole limit when all run side by
    side (a GPU cell), a quarter each for four models one after another.
    """
    if time_limit is None:
        return None
    return time_limit / math.ceil(jobs / min(workers, jobs))


def _train_model(c, out_dir, name, rc, task=None, progress=None, log=None):
    """Train (or continue, or reuse) model ``name`` of the row: a :func:`run_jobs` job."""
    task = task if task is not None else prepare(c, out_dir)[0]
    train_seq(task, rc, os.path.join(out_dir, "runs", name), progress=progress,
              embeddings=c.embeddings if rc.attention != "frozen" else None, log=log,
              label=name)


def _fit_logistic(c, out_dir, key, task=None, progress=None, log=None):
    """The logistic proxy's beta^log rows (Snell Eq. (55)), fitted once and cached in
    logistic.npz: a :func:`run_jobs` job, and what the row reads back after it."""
    task = task if task is not None else prepare(c, out_dir)[0]
    tick = counter(progress, "logistic", 1)
    tick(0)
    lg = cached_rows(os.path.join(out_dir, "logistic.npz"), key,
                     lambda: logistic_rows(task, c))
    tick()
    return lg


def _fit_proxy(c, out_dir, key, task=None, progress=None, log=None):
    """The proxy's beta^px rows, fitted once and cached in proxy.npz: a :func:`run_jobs`
    job, and what the row reads back after it (from the cache when the key matches)."""
    task = task if task is not None else prepare(c, out_dir)[0]
    tick = counter(progress, "proxy", 1)
    tick(0)                                # the bar names the model while it is fitted
    px = cached_rows(os.path.join(out_dir, "proxy.npz"), key, lambda: proxy_rows(task, c))
    tick()
    return px


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
                   # where each model ended: the last step, or earlier under a time limit
                   "steps_run": {name: h[-1]["step"] for name, (h, _) in loaded.items()},
                   "time_limited": {name: bool(h[-1].get("time_limited"))
                                    for name, (h, _) in loaded.items()},
                   "config": asdict(c)})
    if lg is not None:
        result["logistic_lambda"] = float(lg["lambda"])
        result["logistic_val_accuracy"] = float(lg["val_accuracy"])
    result["_variants_full"] = variants
    return result


def _write_outputs(out_dir, dataset, result, task, began):
    variants = result.pop("_variants_full")
    cut = {name: result["steps_run"][name] for name, v in result["time_limited"].items() if v}
    note = ("" if not cut else "\n**Partial: a time limit stopped " + ", ".join(
        f"{name} at step {step}" for name, step in cut.items())
        + "**; the same command without the limit continues them.\n")
    rows = []
    for title, row in variants.items():
        rows += [[title] + r for r in agreement_table.table_rows(dataset, row, title == "Table 2")]
    from minimal_attn.experiments.plots import plot_agreement_curves
    with staged_folder(out_dir) as stage:      # the four files move in together: never a mix
        write_text(os.path.join(stage, "table.md"),
                   agreement_table.markdown_table(dataset, variants) + note)
        write_csv(os.path.join(stage, "table.csv"),
                  ["variant", "task"] + list(agreement_table.COLUMNS), rows)
        plot_agreement_curves(result, os.path.join(stage, "agreement_curves.png"))
        # the row's wall time so far: all but writing this file
        result["seconds"]["row"] = time.perf_counter() - began
        write_json(os.path.join(stage, "agreement.json"), _jsonable(result))


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
