r"""How each kind of cell runs: one runner per ``settings["runner"]`` (issue 19).

A runner takes ``(cell, data_dir, work, device, log, control, progress, inputs)``, runs
the cell's experiment through its library call (:func:`.table1.run_experiment`'s
driver, ``run_hatexplain``, ``run_agreement``, ``run_synthetic``) in the run
folder ``work`` (a rerun resumes there), handing it ``log(line)`` and
``progress(label, done, total, note)`` (:mod:`.progress`), and returns
``(result, settings, device used)`` for :func:`.cells.run_cell`'s record. ``inputs``
holds the records of the parts the cell reads (:func:`.cells.needs`: a multi-head
training part, its screening parts), empty for the others. The torch backends are
imported inside the runners, when a cell runs.
"""

from minimal_attn.experiments.results_store import summarise


def fcam_config(cell, data_dir, device, control=None):
    """The ExperimentConfig of a Table 1 cell; ``control``: how it runs, not what it
    computes (``time_limit`` in seconds; ``compile``, the step's mode, and ``conv_mode``,
    how the seeds' convolutions run: equal to the defaults' results to float rounding)."""
    from minimal_attn.experiments.config import ExperimentConfig, apply_protocol

    s = dict(cell.settings)
    given = {k: s[k] for k in ("seeds", "first_seed", "n_train", "n_test", "epochs", "width",
                               "batch_size") if k in s}
    cadence = {k: s[k] for k in ("eval_every", "checkpoint_every") if k in s}
    c = ExperimentConfig(backend="torch", dataset=s["dataset"], data_dir=data_dir, m=s["m"],
                         paradigms=[s["paradigm"]], switch_epoch=s.get("switch_epoch"),
                         device=device, batch_seeds=True, **(control or {}),
                         **given, **cadence)
    return apply_protocol(c, s["protocol"], explicit=set(given))


def synthetic_size(s):
    from minimal_attn.backends.snell.config import SYNTHETIC_SIZES

    tiny = {"steps": 20, "hidden": 8, "n_test": 20, "eval_every": 10}
    return dict(SYNTHETIC_SIZES["cpu" if s["size"] == "tiny" else s["size"]],
                **(tiny if s["size"] == "tiny" else {}))


def _run_fcam(cell, data_dir, work, device, log, control=None, progress=None,
              inputs=None):
    from minimal_attn.backends.vr.batched import default_mode
    from minimal_attn.backends.vr.table1 import run_experiment

    c = fcam_config(cell, data_dir, device, control)
    results, meta = run_experiment(c, out=work, resume=True, progress=progress, log=log)
    result = fcam_result(results, meta, cell.settings["paradigm"])
    settings = {k: meta[k] for k in ("dataset", "m", "protocol", "optimizer", "focus_init",
                                     "classifier", "stop_loss", "epochs", "batch_size",
                                     "n_train", "n_test", "width", "lr", "switch_epoch",
                                     "eval_every", "time_limit", "compile", "conv_mode",
                                     "pixels", "test_images")}
    # the way the convolutions ran, also where the device chose it
    settings["conv_mode"] = settings["conv_mode"] or default_mode(meta["device"])
    return result, dict(settings, seeds=len(meta["seeds"]), first_seed=meta["seeds"][0]), \
        meta["device"]


def fcam_result(results, meta, paradigm):
    """A record's ``result`` for one paradigm of ``run_experiment``'s (results, meta)."""
    per_seed = {split: results[paradigm][split]["per_seed"] for split in ("train", "test")}
    result = {split: {k: summarise([s[k] for s in per_seed[split]])
                      for k in ("accuracy", "saif")} for split in ("train", "test")}
    result["seeds"] = [s["seed"] for s in per_seed["test"]]      # the per_seed lists' order
    # training time summed over seeds, kept across resumes (batched seeds: their shares)
    result["train_seconds"] = sum(s["seconds"] for s in per_seed["test"])
    result["stopped_epochs"] = meta["stopped_epochs"][paradigm]
    result["epochs_run"] = meta["epochs_run"][paradigm]
    result["time_limited"] = meta.get("time_limited", {}).get(paradigm, {})
    if "test_seen" in results[paradigm]:      # released: seen and unseen test foregrounds
        result["test_seen"] = results[paradigm]["test_seen"]
    return result


def _run_hatexplain(cell, data_dir, work, device, log, control=None, progress=None,
                    inputs=None):
    from minimal_attn.backends.vr.text_train import (
        HateXplainConfig,
        TextTrainConfig,
        run_hatexplain,
    )

    s = cell.settings
    # a seed that diverges at the paper's rates is part of the result, not the end of it
    config = HateXplainConfig(train=TextTrainConfig(embedding=s["embedding"], epochs=s["epochs"],
                                                    device=device),
                              paradigms=(s["paradigm"],), seeds=s["seeds"],
                              on_divergence="record")
    results, meta = run_hatexplain(config, data_dir, out_dir=work, resume=True,
                                   progress=progress, log=log)
    entry = results[s["paradigm"]]
    result = {split: {k: summarise([x[k] for x in entry[split]["per_seed"]])
                      for k in ("accuracy", "saif")} for split in ("train", "test")}
    result["seeds"] = [x["seed"] for x in entry["test"]["per_seed"]]
    if entry.get("diverged"):
        result["diverged"] = entry["diverged"]
    return result, {k: meta[k] for k in ("embedding", "epochs", "lr", "batch_size")}, \
        meta["device"]


#: The smoke size of a Table 2 cell (``"size": "tiny"``): seconds on one CPU core.
TINY_AGREEMENT = {"steps": 20, "hidden": 8, "emb": 8, "out_hidden": 8, "max_train": 200,
                  "max_val": 40, "eval_every": 10, "proxy_d": 8, "proxy_epochs": 2,
                  "vocab_size": 200}


def _run_agreement(cell, data_dir, work, device, log, control=None, progress=None,
                   inputs=None):
    from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement
    from minimal_attn.backends.torch_backend import get_device

    s = cell.settings
    chosen = None if device == "auto" else device
    # on a GPU every model and both proxies side by side (small LSTMs leave it idle between
    # launches; the logistic proxy is host-side); the numbers are those of one after another
    workers = 6 if get_device(chosen, param="device").type == "cuda" else 1
    size = TINY_AGREEMENT if s.get("size") == "tiny" else {}
    config = AgreementConfig(task=s["task"], dataset=s["dataset"], data_dir=data_dir,
                             device=chosen, workers=workers,
                             time_limit=(control or {}).get("time_limit"), **size)
    out = run_agreement(config, work, progress=progress, log=log)
    return agreement_result(out), {"task": s["task"], "dataset": s["dataset"],
                                   "time_limit": config.time_limit, **size}, str(device)


def agreement_result(out):
    """A record's ``result`` from ``run_agreement``'s agreement.json dict (one Table 2 row);
    ``steps_run`` and ``time_limited`` per model say where a time limit stopped each."""
    from minimal_attn.experiments.agreement_table import COLUMNS

    return {"row": [out.get(k) for k in COLUMNS], "columns": list(COLUMNS),
            "unreached": [k for k in COLUMNS if out.get(k + "_reached") is False],
            "performance": out["runs"]["standard"][-1]["val_perf"],
            "performance_name": out["performance"],
            "steps_run": out["steps_run"], "time_limited": out["time_limited"],
            "seconds": _row_seconds(out.get("seconds"))}


def _row_seconds(seconds):
    """The row's wall seconds for its record: the whole row, each job (a model, the
    proxies), and per model its setup, training and evaluation seconds summed over its
    calls."""
    if not seconds:
        return None
    out = {"row": round(seconds["row"], 3),
           "jobs": {k: round(v, 3) for k, v in seconds["jobs"].items()}}
    for name, calls in seconds["models"].items():
        if calls:
            out[name] = {k: round(sum(c[k] or 0.0 for c in calls), 3)
                         for k in ("setup_s", "train_s", "eval_s")}
    return out


def synthetic_config(s, device, control=None):
    """The SyntheticConfig of a synthetic cell's settings ``s`` (its size preset)."""
    from minimal_attn.backends.snell.synthetic_train import SyntheticConfig

    size = synthetic_size(s)
    return SyntheticConfig(steps=size["steps"], hidden=size["hidden"], embed=size["embed"],
                           batch_size=size["batch_size"], lr=size["lr"],
                           eval_every=size.get("eval_every", max(1, size["steps"] // 20)),
                           n_test=size.get("n_test", 200),
                           device="cpu" if device in ("auto", "cpu") else device,
                           paradigm=s.get("paradigm", "sa"),
                           switch_step=s.get("switch_step"), vocab=s.get("vocab"),
                           time_limit=(control or {}).get("time_limit"),
                           compile=(control or {}).get("compile") or "none")


def _run_synthetic(cell, data_dir, work, device, log, control=None, progress=None,
                   inputs=None):
    from minimal_attn.backends.snell.synthetic_experiments import run_synthetic

    s = cell.settings
    config = synthetic_config(s, device, control)
    settings = dict(synthetic_size(s), task=s["task"], seeds=s["seeds"],
                    first_seed=s.get("first_seed", 0), paradigm=config.paradigm,
                    switch_step=config.switch_step, n_test=config.n_test,
                    eval_every=config.eval_every, vocab=config.vocab,
                    compile=config.compile)
    if s.get("phase") == "screen":
        return _screen_part(cell, config, work, log, progress), \
            dict(settings, seeds=0, pool_seed=s["pool_seed"], pool=s["pool"],
                 candidates=[s["first_candidate"], s["candidates"]]), config.device
    head_pool, pool_seed = None, None
    if s.get("phase") == "train":
        head_pool, pool_seed = _joined_pool(cell, config, inputs), s["pool_seed"]
        settings.update(pool_seed=pool_seed, pool_from=sorted(inputs))
    out = run_synthetic(s["task"], config, seeds=s["seeds"], first_seed=s.get("first_seed", 0),
                        heads=s.get("heads", 8), pool=s.get("pool", 24), out_dir=work,
                        resume=True, progress=progress, log=log,
                        pool_seed=pool_seed, head_pool=head_pool)
    conditions = {name: {"seeds": len(c["seeds"]),
                         "converged_fraction": c["converged_fraction"],
                         "failed_fraction": c["failed_fraction"]}
                  for name, c in out["conditions"].items()}
    # a time limit ends training at an evaluation: the fractions are those of that step
    result = {"conditions": conditions, "steps_run": out["stopped_at"] or config.steps,
              "time_limited": {"all": out["stopped_at"] is not None},
              "step_way": out["step_way"]}
    if s["task"] == "multihead":
        if head_pool is None:              # the whole cell: its screening is in it too
            conditions["candidate"] = _candidates(out["head_pool"]["final_accuracy"])
        result["skipped"] = out["skipped"]
    return result, settings, config.device


def _candidates(final):
    """The screened candidate heads as a condition of their own (single-head runs):
    their converged fraction is the pool's fraction of good heads."""
    from minimal_attn.backends.snell.synthetic_experiments import fractions

    return {"seeds": len(final), **fractions([{"accuracy": [a]} for a in final])}


def _screen_part(cell, config, work, log, progress):
    """A multi-head screening part: its candidates' final accuracies (Sec. 5.2)."""
    import os

    from minimal_attn.backends.snell.synthetic_heads import screen_candidates

    s = cell.settings
    first, count = s["first_candidate"], s["candidates"]
    out = screen_candidates(s["pool_seed"], range(first, first + count), config,
                            os.path.join(work, "checkpoints", "head_pool.ckpt"),
                            progress, resume=True, log=log)
    final, stopped = out["final_accuracy"], out["stopped_at"]
    return {"conditions": {"candidate": _candidates(final)},
            "candidates": list(range(first, first + count)),
            "final_accuracy": final, "steps_run": stopped or config.steps,
            "time_limited": {"all": stopped is not None}, "step_way": out["step_way"]}


def _joined_pool(cell, config, inputs):
    """The head pool of a multi-head training part, labelled from the records of the
    cell's screening parts ``inputs`` (:func:`.cells.inputs`); refused when a record
    was screened with other settings than this part trains with."""
    from minimal_attn.backends.snell.synthetic_heads import label_pool, pool_meta
    from minimal_attn.errors import InputError

    s = cell.settings
    final = {}
    for name, record in inputs.items():
        given = {k: record["settings"].get(k) for k in SYNTHETIC_KEYS}
        wanted = {k: s[k] if k == "pool_seed" else getattr(config, k) for k in SYNTHETIC_KEYS}
        if given != wanted:
            raise InputError(f"{name} screened its heads with {given}, but {cell.name} trains "
                             f"with {wanted}: run {name} again")
        final.update(zip(record["result"]["candidates"], record["result"]["final_accuracy"]))
    if sorted(final) != list(range(s["pool"])):
        raise InputError(f"the screening parts {', '.join(inputs)} label candidates "
                         f"{sorted(final)}, not 0..{s['pool'] - 1}: run them again")
    meta = pool_meta(s["pool_seed"], s["pool"], config)
    return label_pool(meta, [final[c] for c in range(s["pool"])])


#: The settings a screening part's record must share with a training part's.
SYNTHETIC_KEYS = ("steps", "hidden", "embed", "batch_size", "lr", "n_test", "vocab",
                  "paradigm", "pool_seed")


RUNNERS = {"fcam": _run_fcam, "hatexplain": _run_hatexplain, "agreement": _run_agreement,
           "synthetic": _run_synthetic}
