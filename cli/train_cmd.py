r"""``attn-dyn train``: train FCAMs with SA, HA, LV and the hybrid; accuracy, SAIF, heat maps.

Vashisht & Ramaswamy (2023), Section 2.4, Table 1 and Figure 1. The torch
backend trains the CNN FCAM of Appendix A.2 on image mosaics (synthetic,
CIFAR-10, CIFAR-100); the NumPy backend trains the linear FCAM of the core on
vector mosaics (synthetic Gaussian, linear orthogonal). torch is imported only
for ``--backend torch``.
"""

import math
import os
import time

import click
import numpy as np

from minimal_attn.errors import InputError, check_int_at_least, check_positive
from minimal_attn.cli.options import parse_paradigms

BACKEND_DATASETS = {"numpy": ("synthetic", "linear-orthogonal"),
                    "torch": ("synthetic", "cifar10", "cifar100")}
DATASETS = ("synthetic", "linear-orthogonal", "cifar10", "cifar100")


def _load_data(dataset, data_dir, m, n_train, n_test, n_classes, foreground, data_seed):
    """(train, test, n_classes, foreground names) for ``dataset``."""
    from minimal_attn.datasets import load_mosaic_splits

    if dataset in ("cifar10", "cifar100") and data_dir is None:
        raise InputError(f"--dataset {dataset} needs --data-dir: the folder holding "
                         + ("cifar-10-batches-py" if dataset == "cifar10" else
                            "cifar-100-python"))
    names = None if foreground is None else [f.strip() for f in foreground.split(",")]
    return tuple(load_mosaic_splits(dataset, m, n_train, n_test, data_dir=data_dir,
                                    n_classes=n_classes, foreground=names, seed=data_seed))


def _mean_std(values):
    """Mean and sample standard deviation over seeds (std 0 for one seed)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def _aggregate(runs):
    """results.json entry of one paradigm from its per-seed runs."""
    entry = {}
    for split in ("train", "test"):
        per_seed = [dict(r[split], seed=r["seed"], seconds=r["seconds"]) for r in runs]
        agg = {}
        for key in ("accuracy", "saif", "ftpt", "ftpf", "ffpt", "ffpf"):
            agg[key], agg[key + "_std"] = _mean_std([s[key] for s in per_seed])
        agg["heatmap"] = np.mean([s["heatmap"] for s in per_seed], axis=0).tolist()
        agg["per_seed"] = per_seed
        entry[split] = agg
    entry["history"] = [{"seed": r["seed"], "epochs": r["history"]} for r in runs]
    return entry


def _pct(entry, key):
    return f"{100 * entry[key]:.1f} ± {100 * entry[key + '_std']:.1f}"


def _summary_rows(results, m):
    return [[p, m, _pct(e["train"], "accuracy"), _pct(e["train"], "saif"),
             _pct(e["test"], "accuracy"), _pct(e["test"], "saif")]
            for p, e in results.items()]


SUMMARY_HEADER = ["paradigm", "m", "train accuracy (%)", "train SAIF (%)",
                  "test accuracy (%)", "test SAIF (%)"]


def summary_markdown(results, m):
    """Table-1-style Markdown table: mean ± std over seeds, in percent."""
    lines = ["| " + " | ".join(SUMMARY_HEADER) + " |",
             "|" + "---|" * len(SUMMARY_HEADER)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in _summary_rows(results, m)]
    return "\n".join(lines) + "\n"


def _write_outputs(out, results, runs, meta, m):
    from minimal_attn.io import write_csv, write_json, write_text
    from minimal_attn.saif import plot_heatmap

    write_json(os.path.join(out, "results.json"), results)
    write_json(os.path.join(out, "config.json"), meta)
    header = ["paradigm", "m"] + [f"{split}_{k}{s}" for split in ("train", "test")
                                  for k in ("accuracy", "saif") for s in ("_mean", "_std")]
    rows = [[p, m] + [e[split][k + s] for split in ("train", "test")
                      for k in ("accuracy", "saif") for s in ("", "_std")]
            for p, e in results.items()]
    write_csv(os.path.join(out, "summary.csv"), header, rows)
    write_text(os.path.join(out, "summary.md"), summary_markdown(results, m))
    n_seeds = len(meta["seeds"])
    for p, entry in results.items():
        for split in ("train", "test"):
            plot_heatmap(entry[split]["heatmap"],
                         f"{p.upper()} {split}, m={m} (mean of {n_seeds} seed(s))",
                         os.path.join(out, f"heatmap_{p}_{split}.png"))
        for r in runs[p]:
            from minimal_attn.io import atomic_open

            with atomic_open(os.path.join(out, f"instances_{p}_seed{r['seed']}.npz"),
                             "wb") as f:
                np.savez(f, **{f"{split}_{k}": r["instances"][split][k]
                               for split in ("train", "test") for k in ("a_z", "s_y")})


def _check_options(backend, dataset, m, epochs, seeds, n_train, n_test, batch_size, lr,
                   hybrid_lr, switch_epoch, threshold, chunk, width, n_classes, resume, out,
                   device):
    if dataset not in BACKEND_DATASETS[backend]:
        other = "torch" if backend == "numpy" else "numpy"
        raise InputError(f"--backend {backend} does not train on --dataset {dataset}: "
                         f"use --backend {other} (numpy: linear FCAM on vector mosaics; "
                         "torch: CNN FCAM on image mosaics)")
    check_int_at_least("--m (segments per mosaic)", m, 2)
    check_int_at_least("--epochs", epochs, 1)
    check_int_at_least("--seeds", seeds, 1)
    check_int_at_least("--n-train", n_train, 1)
    check_int_at_least("--n-test", n_test, 1)
    check_int_at_least("--batch-size", batch_size, 1)
    check_int_at_least("--n-classes", n_classes, 2)
    for name, value in (("--lr", lr), ("--hybrid-lr", hybrid_lr)):
        if value is not None:
            check_positive(name, value)
    check_positive("--width", width)
    if chunk is not None:
        check_int_at_least("--chunk", chunk, 1)
    if switch_epoch is not None and not 0 <= switch_epoch <= epochs:
        raise InputError(f"--switch-epoch must lie in 0..{epochs} (--epochs), got {switch_epoch}")
    if not (math.isfinite(threshold) and 0 < threshold < 1):
        raise InputError(f"--threshold must lie in (0, 1), got {threshold}")
    if resume and out is None:
        raise InputError("--resume needs --out: the folder whose checkpoints/ to resume from")
    if backend == "numpy" and str(device).lower() not in ("auto", "cpu"):
        raise InputError(f"--device {device} applies to --backend torch; the numpy backend "
                         "runs on the CPU")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--backend", type=click.Choice(["numpy", "torch"]), default="torch",
              show_default=True, help="torch: CNN FCAM (Appendix A.2) on image mosaics; "
              "numpy: linear FCAM of the core on vector mosaics.")
@click.option("--dataset", type=click.Choice(DATASETS), default="synthetic",
              show_default=True, help="synthetic needs no files (images for torch, Gaussian "
              "vectors for numpy); cifar10/cifar100 need --data-dir.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="CIFAR folder: cifar-10-batches-py / cifar-100-python or its parent.")
@click.option("--m", "m", type=int, default=5, show_default=True,
              help="Segments per mosaic (>= 2).")
@click.option("--paradigm", default="all", show_default=True,
              help="sa, ha, lv, hybrid (comma-separated) or all.")
@click.option("--epochs", type=int, default=10, show_default=True)
@click.option("--seeds", type=int, default=1, show_default=True,
              help="Number of training seeds (0..S-1): initialisation and batch order.")
@click.option("--n-train", type=int, default=1000, show_default=True,
              help="Training mosaics (from training images).")
@click.option("--n-test", type=int, default=500, show_default=True,
              help="Test mosaics (from test images).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for results.json, config.json, summary.csv/.md, heat maps, "
                   "per-instance scores and checkpoints/.")
@click.option("--resume", is_flag=True,
              help="Continue from the checkpoints in --out (runs without one start fresh).")
@click.option("--device", default="auto", show_default=True,
              help="torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:K.")
@click.option("--lr", type=float, default=None,
              help="Learning rate for every paradigm (hybrid: its SA phase) [default: the "
                   "paper's; CIFAR-10 SA 0.01, HA 0.005, LV 0.01; CIFAR-100 SA 0.005, HA "
                   "0.001, LV 0.01; numpy: 0.5].")
@click.option("--hybrid-lr", type=float, default=None,
              help="Hybrid: learning rate of its HA phase [default: the paper's HA lr].")
@click.option("--batch-size", type=int, default=100, show_default=True)
@click.option("--switch-epoch", type=int, default=None,
              help="Hybrid: first epoch of HA (SA before) [default: epochs // 2].")
@click.option("--threshold", type=float, default=0.8, show_default=True,
              help="Focus/prediction threshold tau of SAIF (a_z > tau and s_y > tau).")
@click.option("--chunk", type=int, default=None,
              help="torch: images per network call [default: all on a GPU, 100 on a CPU].")
@click.option("--width", type=float, default=1.0, show_default=True,
              help="torch: network width multiplier (1 = Appendix A.2; e.g. 0.25 for "
                   "quick CPU runs).")
@click.option("--n-classes", type=int, default=3, show_default=True,
              help="synthetic / linear-orthogonal: number of classes C.")
@click.option("--foreground", default=None,
              help="CIFAR: comma-separated foreground class names [default: airplane, "
                   "automobile, bird for cifar10; 50 animal classes for cifar100].")
@click.option("--data-seed", type=int, default=0, show_default=True,
              help="Seed of the mosaics (the same for every training seed).")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="A progress bar per epoch (stderr) with the running loss.")
def train(backend, dataset, data_dir, m, paradigm, epochs, seeds, n_train, n_test, out,
          resume, device, lr, hybrid_lr, batch_size, switch_epoch, threshold, chunk, width,
          n_classes, foreground, data_seed, progress):
    """Train FCAMs with SA, HA, LV and the hybrid; report accuracy and SAIF (Table 1).

    Each paradigm predicts with its own inference rule; the hybrid trains SA
    until --switch-epoch, then HA, for the same number of epochs. Reported per
    seed and as mean ± std over seeds, for train and test mosaics: accuracy,
    SAIF (fraction with a_z > tau and s_y > tau), the four focus-prediction
    fractions and the Figure 1 heat map of (a_z, s_y).

    With --out a checkpoint is written after every epoch; --resume continues an
    interrupted run (on the CPU it ends exactly where an uninterrupted run does).

    \b
    Examples:
      attn-dyn train                          # synthetic images, all paradigms
      attn-dyn train --backend numpy --dataset linear-orthogonal --m 10
      attn-dyn train --dataset cifar10 --data-dir data/cifar10 --m 5
          --epochs 150 --batch-size 256 --seeds 5 --n-train 30000
          --n-test 10000 --device cuda --out runs/c10_m5
    """
    paradigms = parse_paradigms(paradigm)
    _check_options(backend, dataset, m, epochs, seeds, n_train, n_test, batch_size, lr,
                   hybrid_lr, switch_epoch, threshold, chunk, width, n_classes, resume, out,
                   device)
    if backend == "torch":
        try:
            from minimal_attn.backends import torch_backend
        except ImportError as exc:
            raise InputError(f"--backend torch needs torch ({exc}); install it "
                             "(pip install torch) or use --backend numpy") from None
        device_name = str(torch_backend.get_device(device))
        from minimal_attn.backends.torch_train import train_run as run_one
    else:
        device_name = "cpu"
        from minimal_attn.backends.torch_train import train_numpy_run as run_one
    from minimal_attn.backends.torch_train import TrainConfig

    source = "synthetic-vectors" if (backend, dataset) == ("numpy", "synthetic") else dataset
    train_set, test_set, n_classes, names = _load_data(
        source, data_dir, m, n_train, n_test, n_classes, foreground, data_seed)
    if out is not None:   # every check that can fail is done: now write
        from minimal_attn.io import ensure_dir

        ensure_dir(out)

    arch = "cifar100" if dataset == "cifar100" else "cifar10"
    results, runs, lrs = {}, {}, {}
    for p in paradigms:
        runs[p] = []
        for seed in range(seeds):
            config = TrainConfig(paradigm=p, epochs=epochs, lr=lr, hybrid_lr=hybrid_lr,
                                 batch_size=batch_size, seed=seed, switch_epoch=switch_epoch,
                                 device=device_name, threshold=threshold, dataset=arch,
                                 n_classes=n_classes, chunk=chunk, width=width)
            if resume and not os.path.exists(_checkpoint(out, config)):
                click.echo(f"no checkpoint for {p} seed {seed} in {out}: starting fresh",
                           err=True)
            start = time.perf_counter()
            result = run_one(config, train_set, test_set, out_dir=out, resume=resume,
                             progress=progress)
            result["seconds"] = time.perf_counter() - start
            runs[p].append(result)
            click.echo(f"{p} seed {seed}: " + ", ".join(
                f"{split} accuracy {100 * result[split]['accuracy']:.1f}% SAIF "
                f"{100 * result[split]['saif']:.1f}%" for split in ("train", "test"))
                + f" ({result['seconds']:.1f} s)")
        lrs[p] = sorted({h["lr"] for h in runs[p][0]["history"]})
        results[p] = _aggregate(runs[p])

    meta = {"backend": backend, "dataset": dataset, "data_dir": data_dir, "m": m,
            "n_train": n_train, "n_test": n_test, "n_classes": n_classes,
            "foreground": names, "epochs": epochs, "seeds": list(range(seeds)),
            "paradigms": paradigms, "lr": lrs, "batch_size": batch_size,
            "momentum": 0.9 if backend == "torch" else 0.0,
            "switch_epoch": epochs // 2 if switch_epoch is None else switch_epoch,
            "threshold": threshold, "device": device_name, "chunk": chunk, "width": width,
            "data_seed": data_seed}
    if out is not None:
        _write_outputs(out, results, runs, meta, m)
    click.echo(f"{dataset}, m={m}, {seeds} seed(s), {epochs} epochs, {backend} on "
               f"{device_name}: mean ± std over seeds, in %")
    click.echo(summary_markdown(results, m), nl=False)
    if out is not None:
        click.echo(f"wrote results.json, config.json, summary.csv, summary.md, "
                   f"heatmap_<paradigm>_<split>.png and instances_*.npz to {out}")


def _checkpoint(out, config):
    from minimal_attn.backends.torch_train import checkpoint_path

    return checkpoint_path(out, config)
