# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Where does $\beta^{uf}$ peak on long inputs? (Snell et al. 2021, Sec. 3.2, 6.1, A.7)
#
# A(β^uf, β^px) of Table 2 asks whether the top position of the uniform-attention
# model's probe (Snell Eq. (9)) is among the top 5% of the proxy's probe
# (Snell Eq. (6)). On long inputs it can fall to the random baseline. This script
# measures, for the uniform-attention classifier alone and the proxy, at every
# checkpoint: A(β^uf, β^px), its baseline, and where β^uf's maximum sits
# (on the keyword, on one of the 30 most frequent training words, on the first or
# last token). Data: synthetic keyword sets of 10, 40 and 80 tokens, SST-2
# sentences, HateXplain posts, and SST-2 sentences of one label concatenated to at
# least 40 tokens ("SST-2 x3"). docs/paper2_neural.md ("Longer inputs") holds the numbers and
# the reading. About 2.5 minutes on a quiet 2-core machine (5 beside another job);
# `LONG_STEPS`, `LONG_TRAIN` and `LONG_VAL` set the size, `ATTN_DYN_OUT` the output
# folder (`--help` lists them).

# %%
import collections
import tempfile
from pathlib import Path

import numpy as np
import torch
from _settings import integer, path, read
from _shared_data import shared_data

from minimal_attn import agreement, proxy
from minimal_attn.backends.snell.train import SeqTrainConfig, load_run, train_seq
from minimal_attn.datasets.seq import load_text_task

S = read(takes="about 2.5 minutes on a quiet 2-core machine", data=("sst2", "hatexplain"),
         ATTN_DYN_OUT=path(Path(tempfile.gettempdir()) / "attn_dyn_long", "output folder"),
         LONG_STEPS=integer(500, "Adam steps of each uniform-attention model (checkpoints "
                            "at the first steps, half way and the end)", low=2),
         LONG_TRAIN=integer(None, "training examples per data set; unset: 4,000 (HateXplain: "
                            "every training post)", low=10),
         LONG_VAL=integer(None, "validation examples per data set; unset: all (500 keyword "
                          "sets, 872 SST-2)", low=1))
torch.set_num_threads(1)
OUT = S.ATTN_DYN_OUT
N_TRAIN, N_VAL = S.LONG_TRAIN or 4000, S.LONG_VAL
SST2 = shared_data("sst2")
SETTINGS = {"default": dict(hidden=32), "fast embeddings": dict(hidden=32, emb=32, lr=1e-2)}


def keyword_set(folder, length, seed=0):
    """One keyword (good -> 1, bad -> 0) among ``length - 1`` words drawn from 200 fillers."""
    rng = np.random.default_rng(seed)
    fillers = [f"w{j}" for j in range(200)]
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train.tsv", N_TRAIN), ("dev.tsv", N_VAL or 500)):
        rows = []
        for i in range(n):
            words = list(rng.choice(fillers, length - 1))
            words.insert(int(rng.integers(length)), "good" if i % 2 else "bad")
            rows.append(" ".join(words) + f"\t{i % 2}")
        (folder / name).write_text("\n".join(rows) + "\n")
    return folder


def concatenated_sst2(folder, target=40, seed=0):
    """Same-label SST-2 sentences joined until at least ``target`` tokens."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, name, n, min_words in (("train.tsv", "train.tsv", N_TRAIN, 8),
                                      ("test.tsv", "dev.tsv", N_VAL or 872, 1)):
        rows = [line.rstrip("\n").rsplit("\t", 1) for line in open(SST2 / split)][1:]
        by = {y: [t.strip() for t, lab in rows if int(lab) == y and len(t.split()) >= min_words]
              for y in (0, 1)}
        out = []
        for _ in range(n):
            y, words = int(rng.integers(2)), []
            while len(words) < target:
                words += by[y][rng.integers(len(by[y]))].split()
            out.append(" ".join(words) + f"\t{y}")
        (folder / name).write_text("text\tlabel\n" + "\n".join(out) + "\n")
    return folder


def where_beta_uf_peaks(dataset, folder, out, max_train=None, keywords=(), **settings):
    """Train the uniform model and the proxy; one line per checkpoint."""
    task = load_text_task("classify", dataset, folder, max_train, N_VAL)
    train_seq(task, SeqTrainConfig(task="classify", attention="uniform", steps=S.LONG_STEPS,
                                   eval_every=S.LONG_STEPS // 2, device="cpu", **settings),
              out)
    params, _ = proxy.train_proxy(task.train_src, task.train_tgt, task.n_vocab, 2,
                                  proxy.ProxyConfig(d=256, epochs=5),
                                  val=(task.val_src, task.val_tgt))
    beta_px = [proxy.beta_px(params, x, y) for x, y in zip(task.val_src, task.val_tgt)]
    counts = collections.Counter(np.concatenate(task.train_src).tolist())
    frequent = {i for i, _ in counts.most_common(30)}
    keyword = {task.itos.index(w) for w in keywords if w in task.itos}
    history, evals = load_run(out)
    for h in history:
        beta_uf = evals[h["step"]]["val_beta"]
        top = [int(np.argmax(b[0])) for b in beta_uf]
        score = agreement.average_agreement(beta_uf, beta_px, kendall=False)
        ids = [int(x[t]) for x, t in zip(task.val_src, top)]
        ends = np.mean([t in (0, len(x) - 1) for x, t in zip(task.val_src, top)])
        where = (f"max on the keyword {100 * np.mean([i in keyword for i in ids]):3.0f}%"
                 if keyword else
                 f"max on a frequent word {100 * np.mean([i in frequent for i in ids]):3.0f}%")
        print(f"  step {h['step']:3d} acc {h['val_perf']:.3f}  A(buf,bpx) "
              f"{100 * score['agreement']:5.1f} (baseline {100 * score['baseline']:4.1f})  "
              f"{where}  first/last {100 * ends:3.0f}%", flush=True)


# %% [markdown]
# ## Synthetic keywords: the pipeline puts both probes on the keyword at every length

# %%
for length in (10, 40, 80):
    print(f"keyword, {length} tokens")
    where_beta_uf_peaks("tsv", keyword_set(OUT / f"kw{length}", length, seed=length),
                        OUT / f"runs_kw{length}", keywords=("good", "bad"),
                        **SETTINGS["default"])

# %% [markdown]
# ## SST-2: short sentences, then concatenated ones, with both settings

# %%
if SST2 is None:
    print("SST-2 not found (set ATTN_DYN_DATA); skipping the real-data part")
else:
    print(f"SST-2 sentences (first {N_TRAIN:,} training phrases)")
    where_beta_uf_peaks("sst2", SST2, OUT / "runs_sst2", max_train=N_TRAIN,
                        **SETTINGS["default"])
    if shared_data("hatexplain") is not None:
        print("HateXplain posts (official train/val split)")
        where_beta_uf_peaks("hatexplain", shared_data("hatexplain"), OUT / "runs_hatexplain",
                            max_train=S.LONG_TRAIN, **SETTINGS["default"])
    long_folder = concatenated_sst2(OUT / "sst2x3")
    for name, settings in SETTINGS.items():
        print(f"SST-2 x3, {name} settings {settings}")
        where_beta_uf_peaks("tsv", long_folder, OUT / f"runs_sst2x3_{name.split()[0]}",
                            **settings)
