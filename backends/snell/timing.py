"""Where the wall time of Snell models and of a Table 2 row goes.

:class:`Clock` keeps each model's ``timing.json`` in its run folder
(:func:`.train.train_seq`); :func:`read_calls` reads it back; the row (:mod:`.agreement`)
gathers them with each job's seconds into agreement.json's ``seconds``, and
:func:`seconds_line` says it in one line. Provenance, not state: nothing reads these
files to decide what to compute.
"""

import os
import time

import torch

from minimal_attn.experiments.checkpoints import read_json
from minimal_attn.experiments.io import write_json

FILE = "timing.json"


def read_calls(run_dir):
    """The per-call records of ``run_dir/timing.json``; None when it is absent or
    unreadable (a run from before they were kept)."""
    try:
        return list(read_json(os.path.join(run_dir, FILE))["calls"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Clock:
    """Where one call of :func:`.train.train_seq` spends its wall time, kept in ``timing.json``.

    ``setup_s``: from the call to its first evaluation or step (reading the checkpoint,
    building the model, the splits to the device); ``train_s``: the training steps;
    ``eval_s``: the evaluations with their files and checkpoints. On a GPU the card is
    synchronised before each evaluation, so queued steps count as training. The file
    holds one record per call (a continued run adds one) and is rewritten after every
    evaluation, so a run killed midway (a job's time limit) still says where its time
    went. It is provenance, not state: a run continues without it.
    """

    def __init__(self, out_dir, device, step, start):
        self.path = os.path.join(out_dir, FILE)
        self.cuda = torch.device(device).type == "cuda"
        # a call from step 0 starts the run: no earlier calls
        self.calls = (read_calls(out_dir) or []) if step > 0 else []
        self.now = {"device": str(device), "from_step": step, "to_step": step, "evals": 0,
                    "setup_s": None, "train_s": 0.0, "eval_s": 0.0}
        self.start, self.mark = start, None

    def _time(self):
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def _close_setup(self, t):
        if self.now["setup_s"] is None:
            self.now["setup_s"] = t - self.start

    def training(self):
        """The first training step of the call (a continued run may start with one)."""
        if self.mark is None:
            self.mark = self._time()
            self._close_setup(self.mark)

    def evaluating(self, step):
        t = self._time()
        self._close_setup(t)
        if self.mark is not None:
            self.now["train_s"] += t - self.mark
        self.mark, self.now["to_step"] = t, step

    def evaluated(self):
        t = self._time()
        self.now["eval_s"] += t - self.mark
        self.now["evals"] += 1
        self.mark = t
        write_json(self.path, {"calls": self.calls + [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in self.now.items()}]})


def seconds_line(result):
    """One line of where a row's wall time went, from agreement.json's ``seconds``: the
    row, its jobs (side by side when ``workers`` > 1), the proxies here (fitted when
    ``workers`` is 1, else read back from their jobs' caches), and each model's setup,
    steps, training and evaluation seconds in its last call that trained (a reused
    model's are those of the run that trained it). A job's seconds beyond those are its
    process's start and reading the data."""
    t = result.get("seconds")
    if not t:
        return "no timings recorded"
    parts = []
    for name, took in t["jobs"].items():
        calls = t["models"].get(name)
        if calls:
            c = calls[-1]
            parts.append(f"{name} {took:.0f} s (model setup {c['setup_s'] or 0:.0f} s; steps "
                         f"{c['from_step']}-{c['to_step']}: train {c['train_s']:.0f} s, "
                         f"{c['evals']} evaluations {c['eval_s']:.0f} s)")
        else:
            parts.append(f"{name} {took:.0f} s")
    return (f"Took {t['row']:.0f} s: data {t['prepare']:.0f} s, jobs {t['all_jobs']:.0f} s, "
            f"proxies {t['proxies']:.0f} s; " + "; ".join(parts))
