# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Table 1 on HateXplain: human rationales as the true foreground
#
# Vashisht & Ramaswamy (2023), *On the Learning Dynamics of Attention Networks*,
# Section 5, Appendix A.3 and Table 1 (rows HateXplain-1 and HateXplain-2).
#
# **The task.** A post is a sequence of word tokens $x_1, \dots, x_L$, the
# segments of the FCAM. Its label (here toxic / non-toxic) is explained by the
# annotators' *rationale*: the tokens $z^*$ that made them choose the label.
# The rationale plays the role of the foreground image of a CIFAR mosaic, but
# it is a *set* of tokens, so the focus on the true foreground is
#
# $$a_{z^*} = \sum_{z \in z^*} a_z \qquad \text{(Section 5)}.$$
#
# A non-toxic post has no rationale: it counts for accuracy and is left out of
# SAIF, the fraction of posts with $a_{z^*} > 0.8$ *and* true-class score
# $s_y > 0.8$.
#
# **The models (Appendix A.3).** HateXplain-1: word embedding (100), a focus MLP
# (one hidden layer of 200 ReLU units) giving one score per token, and a
# classifier MLP (200 ReLU units) on a token (HA, LV) or on the attention-weighted
# average embedding (SA). HateXplain-2 puts a 2-head transformer encoder layer
# with positional encoding between the embedding and focus/classifier (focus
# hidden 50). SGD with momentum; learning rates SA 0.1, HA 0.1, LV 0.3; the
# hybrid trains SA at 0.1 for the first half of the epochs, then HA at 0.01.
#
# **The claim to check.** In Table 1 the hybrid and LV reach a much higher SAIF
# than SA at about the same accuracy (HateXplain-1: SAIF 21.6 and 22.6 against
# 4.6, accuracy 54.6 against 51.6).

# %% [markdown]
# ## Size and caveats
#
# The shared copy is binary (toxic / non-toxic, 5,514 training posts, the full
# official test split of 1,924); the paper's rows are 3-class on all 15,383
# training posts, so the paper columns are a reference, not the same task. The
# paper gives neither the number of epochs nor the batch size; we use the same
# number of epochs for every paradigm (equal optimiser steps) and batch 128
# (smaller batches make LV at the paper's lr 0.3 diverge). `HX_EPOCHS`,
# `HX_SEEDS` and `HX_MAX_LEN` set the size (`--help` lists every setting); the
# default (25 epochs, 1 seed, one thread) needs about 12 minutes of CPU time (a
# 6-epoch run measured 70 s of CPU time on 2026-12-08; on a loaded machine the wall time is
# longer). The same run is one command per embedding:
#
# ```
# attn-dyn train --dataset hatexplain --data-dir ../shared/data/hatexplain --embedding standard \
#     --paradigm all --epochs 25 --seeds 1 --out runs/hatexplain1
# attn-dyn train --dataset hatexplain --data-dir ../shared/data/hatexplain \
#     --embedding self-attention \
#     --paradigm all --epochs 25 --seeds 1 --out runs/hatexplain2
# ```

# %%
import sys
import tempfile
import time
from pathlib import Path

import torch
from _settings import choice, integer, path, read
from _shared_data import shared_data

from minimal_attn.backends.vr.text_train import HateXplainConfig, TextTrainConfig, run_hatexplain
from minimal_attn.experiments.hatexplain_report import PAPER_ROWS, summary_markdown

EMBEDDINGS = ("standard", "self-attention")          # HateXplain-1, HateXplain-2
S = read(takes="about 12 minutes of CPU time (longer on a loaded machine)",
         data=("hatexplain",),
         HX_EPOCHS=integer(25, "epochs of every paradigm (equal optimiser steps)", low=1),
         HX_SEEDS=integer(1, "seeds per paradigm", low=1),
         HX_MAX_LEN=integer(None, "cut posts to their first N tokens; unset: every token",
                            low=1),
         HX_EMBEDDINGS=choice(EMBEDDINGS, "the rows to train", EMBEDDINGS, many=True),
         HX_THREADS=integer(1, "torch CPU threads", low=1),
         HX_OUT=path(None, "output folder; unset: a new temporary folder"))
EPOCHS, SEEDS = S.HX_EPOCHS, S.HX_SEEDS
OUT = S.HX_OUT or Path(tempfile.mkdtemp(prefix="hatexplain_table1_"))
torch.set_num_threads(S.HX_THREADS)

folder = shared_data("hatexplain")
if folder is None:
    print("HateXplain not found at ../shared/data/hatexplain: nothing to run (point "
          "run_hatexplain at a folder with hatexplain_binary.jsonl or dataset.json)")
    sys.exit(0)

# %% [markdown]
# ## Train all four paradigms for both embeddings
#
# `run_hatexplain` reads the posts, builds the vocabulary on the training split,
# trains every paradigm and seed and writes the same results folder as the
# CIFAR runs (`results.json`, `summary.md`, heat maps, checkpoints).

# %%
tables, wall = {}, {}


def show(line):
    """Per-seed results and warnings; the per-epoch lines go to history.jsonl only."""
    if " epoch " not in line:
        print(line, flush=True)


for embedding in S.HX_EMBEDDINGS:
    config = HateXplainConfig(train=TextTrainConfig(embedding=embedding, epochs=EPOCHS),
                              seeds=SEEDS, max_len=S.HX_MAX_LEN)
    start = time.perf_counter()
    tables[embedding] = run_hatexplain(config, folder, OUT / embedding, log=show)
    wall[embedding] = time.perf_counter() - start
    print(summary_markdown(*tables[embedding]))
print("wall time: " + ", ".join(f"{e} {s:.0f} s" for e, s in wall.items())
      + f"; results in {OUT}")

# %% [markdown]
# ## Do the hybrid and LV reach a higher SAIF than SA at similar accuracy?
#
# "Similar accuracy" is taken as within 3 points of SA's test accuracy. The
# verdict is computed from the numbers above, whatever they are.

# %%
for embedding, (results, _) in tables.items():
    sa = results["sa"]["test"]
    paper = PAPER_ROWS[embedding]
    for p in ("hybrid", "lv"):
        t = results[p]["test"]
        higher = t["saif"] > sa["saif"]
        similar = abs(t["accuracy"] - sa["accuracy"]) <= 0.03
        print(f"{paper['name']} ({embedding}): {p} SAIF {100 * t['saif']:.1f}% vs SA "
              f"{100 * sa['saif']:.1f}% -> {'higher' if higher else 'NOT higher'}; accuracy "
              f"{100 * t['accuracy']:.1f}% vs {100 * sa['accuracy']:.1f}% -> "
              f"{'similar' if similar else 'NOT similar'}  (paper, 3-class: SAIF "
              f"{paper['saif'][p]} vs {paper['saif']['sa']}, accuracy "
              f"{paper['accuracy'][p]} vs {paper['accuracy']['sa']})")
