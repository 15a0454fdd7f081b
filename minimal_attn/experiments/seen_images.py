r"""Test accuracy and SAIF split by whether a test mosaic's foreground image was trained on.

The authors' released notebooks draw their test mosaics from the CIFAR *training*
images (``test_images="train"``, ``--protocol released``; docs/train.md): every
test mosaic is new, but its foreground image may also be the foreground of a
training mosaic, whose label the classifier has fitted. Foreground and background
classes are disjoint, so an image is only ever a foreground. At the paper's size
(10,000 training mosaics drawn from CIFAR-10's 15,000 training images of the three
foreground classes) about ``1 - exp(-2/3)``, half, of the test foregrounds were
seen. V&R's SAIF and accuracy (Section 2.4) over those two groups separately say
how much of a released-protocol score is recall of a seen image.

:func:`foreground_seen` marks the test mosaics; :func:`breakdown` splits the
per-instance arrays of a run's evaluation (``a_z``, ``s_y``, ``correct``) by that
mark; :func:`from_run` does both for a finished result folder of ``attn-dyn train``
or a cell (its ``config.json`` and ``instances_*.npz``), rebuilding the mosaics'
sources from the data folder.
"""

import os

import numpy as np

from minimal_attn import saif
from minimal_attn.errors import InputError
from minimal_attn.experiments.checkpoints import load_guarded, read_json
from minimal_attn.experiments.results_store import summarise

#: The two groups of test mosaics, in the order the tables show them.
GROUPS = ("seen", "unseen")


def foreground_seen(train, test):
    """Per test mosaic (bool (N_test,)): whether its foreground image is also the
    foreground of a training mosaic. Both are :class:`~minimal_attn.data.Mosaics` of
    images drawn from the *same* split (``source`` indexes it; image mosaics only)."""
    if train.source is None or test.source is None:
        raise InputError("foreground_seen needs image mosaics (their source indices): "
                         "CIFAR mosaics from load_mosaic_splits")

    def foregrounds(mosaics):
        return mosaics.source[np.arange(len(mosaics.z)), mosaics.z]

    return np.isin(foregrounds(test), foregrounds(train))


def breakdown(instances, seen, threshold=0.8):
    """Accuracy and SAIF of the seen and the unseen test mosaics, per seed.

    ``instances``: one dict per seed with the per-instance test arrays ``a_z``,
    ``s_y`` and ``correct`` (a run folder written before ``correct`` was kept has
    none: accuracy is then None); ``seen``: :func:`foreground_seen`. Returns
    ``{"fraction_seen", "n_seen", "n_unseen", "seen": {...}, "unseen": {...}}``, each
    group ``{"accuracy", "saif"}`` as :func:`.results_store.summarise` (per seed, mean,
    std); a group with no mosaic is None.
    """
    seen = np.asarray(seen, dtype=bool)
    for r in instances:
        if any(np.shape(r[k]) != seen.shape for k in r):
            raise InputError(f"test instances of shapes {[np.shape(v) for v in r.values()]} "
                             f"but {len(seen)} test mosaics: the instances are not of these "
                             "mosaics")
    out = {"fraction_seen": float(seen.mean()), "n_seen": int(seen.sum()),
           "n_unseen": int((~seen).sum())}
    for group, mask in zip(GROUPS, (seen, ~seen)):
        if not mask.any():
            out[group] = None
            continue
        saifs = [saif.saif(r["a_z"][mask], r["s_y"][mask], threshold) for r in instances]
        correct = [r.get("correct") for r in instances]
        out[group] = {"saif": summarise(saifs),
                      "accuracy": None if any(c is None for c in correct) else
                      summarise([np.mean(np.asarray(c)[mask]) for c in correct])}
    return out


def from_run(run_dir, data_dir):
    """:func:`breakdown` of every paradigm of the finished result folder ``run_dir``
    (``attn-dyn train --dataset cifar10|cifar100 --test-images train``, or a released
    cell's folder), its test mosaics rebuilt from ``data_dir`` with the run's own
    settings (config.json). Returns ``{paradigm: breakdown}``."""
    from minimal_attn.datasets.splits import load_mosaic_splits

    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(os.path.join(run_dir, "results.json")) or not os.path.isfile(path):
        raise InputError(f"{run_dir} holds no finished run (results.json and config.json): "
                         "give the folder a finished `attn-dyn train` or cell wrote",
                         param="run_dir")
    c = load_guarded(path, read_json, _config_problem, what="run settings",
                     fix="rerun the run to rewrite it", prev=False)
    if c.get("test_images", "test") != "train":
        raise InputError(f"the run in {run_dir} tested on held-out images (test_images "
                         f"{c.get('test_images', 'test')!r}): no test image was seen in "
                         "training", param="run_dir")
    instances = {p: [_read_instances(os.path.join(run_dir, f"instances_{p}_seed{seed}.npz"))
                     for seed in c["seeds"]] for p in c["paradigms"]}
    splits = load_mosaic_splits(c["dataset"], c["m"], c["n_train"], c["n_test"],
                                data_dir=data_dir, foreground=c.get("foreground"),
                                seed=c.get("data_seed", 0), test_images="train")
    seen = foreground_seen(splits.train, splits.test)
    return {p: breakdown(runs, seen, c.get("threshold", 0.8)) for p, runs in instances.items()}


def _config_problem(c):
    """Why ``c`` is not the config.json of a CIFAR Table 1 run (None when it is)."""
    from minimal_attn.datasets.splits import CIFAR_DATASETS

    def whole(v, least):
        return isinstance(v, int) and not isinstance(v, bool) and v >= least

    if not isinstance(c, dict):
        return "not a JSON object"
    checks = {"dataset": c.get("dataset") in CIFAR_DATASETS, "m": whole(c.get("m"), 2),
              "n_train": whole(c.get("n_train"), 1), "n_test": whole(c.get("n_test"), 1),
              "data_seed": whole(c.get("data_seed", 0), 0),
              "paradigms": isinstance(c.get("paradigms"), list) and bool(c["paradigms"])
              and all(isinstance(p, str) and p.isidentifier() for p in c["paradigms"]),
              "seeds": isinstance(c.get("seeds"), list) and bool(c["seeds"])
              and all(whole(k, 0) for k in c["seeds"]),
              "threshold": isinstance(c.get("threshold", 0.8), (int, float))
              and 0 < c.get("threshold", 0.8) < 1,
              "foreground": c.get("foreground") is None or isinstance(c["foreground"], list)
              and all(isinstance(n, str) for n in c["foreground"])}
    bad = [k for k, ok in checks.items() if not ok]
    return f"not the config.json of a CIFAR Table 1 run ({', '.join(bad)})" if bad else None


def _read_instances(path):
    """The per-mosaic test arrays of one run (``instances_<p>_seed<k>.npz``)."""
    if not os.path.isfile(path):
        raise InputError(f"{path} is missing: the run folder is incomplete", param="run_dir")
    return load_guarded(path, _test_instances, _instances_problem, what="per-mosaic scores",
                        fix="rerun the run to rewrite it", prev=False)


def _instances_problem(d):
    """Why ``d`` (a run's test arrays) cannot be split (None when it can)."""
    if not {"a_z", "s_y"} <= set(d):
        return "it holds no test_a_z and test_s_y"
    odd = [k for k, v in d.items() if v.ndim != 1 or v.dtype.kind not in "biuf"]
    return f"test_{', test_'.join(odd)} not one number per mosaic" if odd else None


def _test_instances(path):
    with np.load(path) as d:
        return {k[len("test_"):]: d[k] for k in d.files if k.startswith("test_")}


def summary_lines(by_paradigm):
    """Markdown lines naming the seen fraction and each paradigm's two groups."""
    if not by_paradigm:
        return ""
    first = next(iter(by_paradigm.values()))
    lines = [f"Test mosaics whose foreground image is also a training foreground: "
             f"{100 * first['fraction_seen']:.1f}% ({first['n_seen']} of "
             f"{first['n_seen'] + first['n_unseen']}). Test %, mean ± std over seeds:", "",
             "| paradigm | accuracy seen | accuracy unseen | SAIF seen | SAIF unseen |",
             "|---|---|---|---|---|"]

    def pct(group, key):
        v = group and group[key]
        return "-" if not v else f"{100 * v['mean']:.1f} ± {100 * v['std']:.1f}"

    for p, b in by_paradigm.items():
        lines.append(f"| {p} | {pct(b['seen'], 'accuracy')} | {pct(b['unseen'], 'accuracy')} "
                     f"| {pct(b['seen'], 'saif')} | {pct(b['unseen'], 'saif')} |")
    return "\n".join(lines) + "\n"
