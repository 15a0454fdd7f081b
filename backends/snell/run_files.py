"""The files of one Snell model's run folder (:func:`.train.train_seq` writes them).

* ``eval_<step>.npz``: one evaluation's arrays, ragged lists of 2-D arrays flattened
  (:func:`save_rows`, :func:`load_rows`; the proxies' caches use the same format);
* ``history.json``: one record per evaluation; :func:`load_run` reads it with its
  evaluation files, refusing a damaged or missing one in one line.

``checkpoint.pt`` is :mod:`minimal_attn.experiments.checkpoints`'s, ``timing.json``
:mod:`.timing`'s.
"""

import os

import numpy as np

from minimal_attn.errors import InputError
from minimal_attn.experiments.checkpoints import load_guarded, read_json
from minimal_attn.experiments.io import atomic_open


def save_rows(path, arrays):
    """Save dicts of ragged lists of 2-D arrays as ``<key>_flat`` and ``<key>_shape``."""
    flat = {}
    for key, value in arrays.items():
        if isinstance(value, list):
            flat[key + "_flat"] = (np.concatenate([a.ravel() for a in value])
                                   if value else np.zeros(0))
            flat[key + "_shape"] = np.array([a.shape for a in value], dtype=np.int64)
        else:
            flat[key] = np.asarray(value)
    with atomic_open(path, "wb") as f:
        np.savez(f, **flat)


def load_rows(path):
    """Inverse of :func:`save_rows`."""
    out = {}
    with np.load(path) as z:
        for key in z.files:
            if key.endswith("_shape"):
                name, shapes = key[:-6], z[key]
                flat, ends = z[name + "_flat"], np.cumsum(np.prod(shapes, axis=1))
                out[name] = [flat[e - r * c:e].reshape(r, c) for e, (r, c) in zip(ends, shapes)]
            elif not key.endswith("_flat"):
                out[key] = z[key]
    return out


def _history_problem(history):
    ok = isinstance(history, list) and all(isinstance(h, dict) and "step" in h for h in history)
    return None if ok else "not a history of evaluations"


def load_run(out_dir):
    """The history of a finished or partial run and its evaluation arrays by step."""
    fix = f"delete the folder {out_dir} to train that model again"
    history = load_guarded(os.path.join(out_dir, "history.json"), read_json, _history_problem,
                           what="history", fix=fix, prev=False)
    if history is None:
        raise InputError(f"{out_dir} holds no history.json; {fix}")
    arrays = {}
    for h in history:
        path = os.path.join(out_dir, f"eval_{h['step']:06d}.npz")
        arrays[h["step"]] = load_guarded(path, load_rows, what="evaluation file", fix=fix,
                                         prev=False)
        if arrays[h["step"]] is None:
            raise InputError(f"evaluation file {path} is missing; {fix}")
    return history, arrays
