# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Both papers in one frame: SA, HA, LV and the hybrid on Snell et al.'s tasks
#
# Vashisht & Ramaswamy (2023) compare four ways to train a focus: soft attention
# (SA), hard attention (HA), the latent-variable marginal likelihood (LV), all three
# defined in V&R Sec. 2.3 (their gradients: V&R Eqs. (7)-(12)), and the hybrid
# (SA, then HA). Snell et al. (2021) study SA alone, in LSTM models, and build a
# task where it often fails: copying permutations of the same 40 words (Sec. 3.3),
# where the lexical probe
# $\beta_{t,l} = N([h_l, s_t])_{y_t}$ (Snell Eq. (4)) carries no signal early on.
#
# Per target token t over the source positions l, with $\alpha_{t,l}$ the
# attention and $p(y_t \mid s_t, h_l)$ the output computed from position l alone
# (exactly the probe's number):
#
# $$L^{SA}_t = -\log p(y_t \mid s_t, c_t),\quad
#   L^{HA}_t = \sum_l \alpha_{t,l}\,(-\log p(y_t \mid s_t, h_l)),\quad
#   L^{LV}_t = -\log \sum_l \alpha_{t,l}\, p(y_t \mid s_t, h_l).$$
#
# HA and LV train the attention through $\beta$ directly: V&R Eq. (12) gives LV's
# focus gradient $a_l - \gamma_l$, $\gamma_l \propto \alpha_l p_l$, so attention
# moves toward positions whose own prediction is good; SA's incentive passes
# through the context vector. The classifier (Snell Eq. (8)) uses
# $\gamma_l = W h_l$ as the per-position logit. Inference follows V&R Sec. 2.3:
# HA reads the most-attended position, LV the $\alpha$-weighted mixture, the
# hybrid infers as SA before its switch and as HA after.
#
# **Size (CPU: 17.6 minutes on one thread of the shared 2-core machine).**
# Permutation copy and its control: 5 seeds per condition, all 10 runs of a
# paradigm one seed-batched model, LSTM width 32, batch 16, Adam lr 3e-3, 500
# steps, 100 test sequences per seed; the hybrid switches per seed when its SA
# focus (mean $\max_l \alpha_{t,l}$) has risen and stalled (``auto``). SST-2:
# width 32, 500 steps, the first 10,000 training sentences (the CPU row of
# `examples/paper2_agreement.py`); the paradigm trains the standard and second
# models, and the uniform and frozen models (the $\beta^{uf}$ reference) and the
# proxy are shared by all four rows. Sizes come from the environment
# (`BOTH_SEEDS`, `BOTH_STEPS`, `BOTH_BATCH`, `BOTH_SST_STEPS`, `BOTH_SST_TRAIN`,
# `BOTH_SST_VAL`, `BOTH_OUT`; `--help` lists them).

# %%
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from _settings import integer, path, read
from _shared_data import shared_data

from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement
from minimal_attn.backends.snell.synthetic_experiments import run_synthetic
from minimal_attn.backends.snell.synthetic_train import SyntheticConfig
from minimal_attn.experiments.agreement_table import PAPER_TABLE2

S = read(takes="17.6 minutes on one thread of the shared 2-core machine", data=("sst2",),
         BOTH_SEEDS=integer(5, "seeds per copy condition and paradigm (batched)", low=1),
         BOTH_STEPS=integer(500, "Adam steps on the copy tasks", low=1),
         BOTH_BATCH=integer(16, "sequences per copy step", low=1),
         BOTH_SST_STEPS=integer(500, "Adam steps of each SST-2 model", low=1),
         BOTH_SST_TRAIN=integer(10000, "first N SST-2 training sentences", low=10),
         BOTH_SST_VAL=integer(None, "first N SST-2 validation sentences; unset: all 872",
                              low=1),
         BOTH_OUT=path(Path(tempfile.gettempdir()) / "attn_dyn_both", "output folder; the "
                       "SST-2 rows reuse the finished runs there"))
torch.set_num_threads(1)
OUT, SEEDS, STEPS, BATCH = S.BOTH_OUT, S.BOTH_SEEDS, S.BOTH_STEPS, S.BOTH_BATCH
SST_STEPS = S.BOTH_SST_STEPS
if shared_data("sst2") is None:
    print("SST-2 not found at ../shared/data/sst2: nothing to run (set ATTN_DYN_DATA)")
    sys.exit(0)
PARADIGMS = ("sa", "ha", "lv", "hybrid")
START = time.time()

# %% [markdown]
# ## Permutation copy and control, each paradigm (seeds batched)

# %%
copy = {}
for p in PARADIGMS:
    config = SyntheticConfig(steps=STEPS, hidden=32, batch_size=BATCH, lr=3e-3,
                             eval_every=max(1, STEPS // 20), n_test=100, paradigm=p,
                             switch_step="auto" if p == "hybrid" else None)
    t0 = time.time()
    copy[p] = run_synthetic("copy", config, seeds=SEEDS, out_dir=str(OUT / f"copy_{p}"))
    print(f"copy {p}: {(time.time() - t0) / 60:.1f} min", flush=True)


def summary(entry):
    """Converged fraction, steps to converge (median [min-max] of converged seeds), final
    accuracy min/median/max."""
    seeds = entry["seeds"]
    steps = sorted(s["converged_step"] for s in seeds if s["converged"])
    final = np.array([s["final_accuracy"] for s in seeds])
    when = (f"{int(np.median(steps))} [{steps[0]}-{steps[-1]}]" if steps else "-")
    return (f"{sum(s['converged'] for s in seeds)}/{len(seeds)}", when,
            f"{final.min():.2f}/{np.median(final):.2f}/{final.max():.2f}")


# %% [markdown]
# ## SST-2 agreement row, each paradigm
# The SA row trains every model; the other rows reuse its uniform and frozen
# models and its proxies (copied folders: `train_seq` reuses a finished run whose
# settings match), so only the standard and second models are trained again.

# %%
sst = {}
base = AgreementConfig(task="classify", dataset="sst2", data_dir=str(shared_data("sst2")),
                       hidden=32, emb=32, lr=1e-2, steps=SST_STEPS, eval_every=100,
                       max_train=S.BOTH_SST_TRAIN, max_val=S.BOTH_SST_VAL, proxy_d=64,
                       kendall=False)
for p in PARADIGMS:
    out = OUT / f"sst2_{p}"
    if p != "sa":
        for shared in ("runs/uniform", "runs/frozen", "proxy.npz", "logistic.npz"):
            src, dst = OUT / "sst2_sa" / shared, out / shared
            if src.exists() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    t0 = time.time()
    sst[p] = run_agreement(replace(base, paradigm=p,
                                   switch_step="auto" if p == "hybrid" else None), str(out))
    print(f"sst2 {p}: {(time.time() - t0) / 60:.1f} min", flush=True)
WALL = (time.time() - START) / 60

# %% [markdown]
# ## The table: each paradigm beside Snell's SA numbers
# Copy: seeds converged (final test accuracy > 0.95, Sec. 3.3), steps to the
# first evaluation above 0.95 (median [min-max] over converged seeds) and final
# accuracy min/median/max over the seeds. SST-2: validation accuracy,
# $A(\alpha,\beta)$ (Snell Eq. (10), $\beta$ the model's own probe) and
# $A(\alpha,\beta^{px})$ ($\beta^{px}$ the proxy, Snell Eq. (6)), percent.

# %%
rows = ["| paradigm | perm. converged | perm. steps | perm. final acc | control converged "
        "| control steps | control final acc | SST-2 acc | A(α,β) | A(α,β^px) |",
        "|---|---|---|---|---|---|---|---|---|---|"]
for p in PARADIGMS:
    perm, ctrl = (summary(copy[p]["conditions"][c]) for c in ("permutation", "control"))
    r = sst[p]
    acc = r["runs"]["standard"][-1]["val_perf"]
    rows.append(f"| {p} | " + " | ".join(perm + ctrl) + f" | {100 * acc:.1f} | "
                f"{100 * r['A_alpha_beta']:.1f} | {100 * r['A_alpha_beta_px']:.1f} |")
rows.append("| Snell et al., SA (paper size) | some of 20 fail (Fig. 3) | | | 20/20 (Fig. 3) "
            f"| | | | {PAPER_TABLE2['SST'][3]} | |")
print("\n".join(rows))
switch_sst = [h["switch_step"] for h in sst["hybrid"]["runs"]["standard"] if "switch_step" in h]
print(f"\nA_hat (random baseline) on SST-2: {100 * sst['sa']['A_hat']:.1f}; "
      f"hybrid switch steps (copy, per seed): "
      f"{[s['switch_step'] for s in copy['hybrid']['seeds']]}, SST-2: {switch_sst}")
print(f"wall time {WALL:.1f} min, load average {os.getloadavg()[0]:.1f}")
