# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Word co-occurrence, IBM Model 1 and the proxy model
#
# Snell, Zhong, Klein & Steinhardt (2021), "Approximating How Single Head
# Attention Learns", Sections 2.3, 3.1 and 4. This tutorial runs as a plain
# script (`python examples/paper2_proxy_ibm1.py`, well under a minute) on a
# slice of Multi30k in `../shared/data/multi30k` (or `$ATTN_DYN_DATA/multi30k`, or the
# folder in `$MULTI30K`), and opens as a notebook with jupytext. The sizes come
# from the environment (`PROXY_PAIRS`, `PROXY_HELD`, `PROXY_EPOCHS`, `PROXY_MAX_D`;
# `--help` lists them).
#
# **The claim.** Early in training the attention of a seq2seq model is nearly
# uniform, so every output word $y_t$ is predicted from the same average of the
# input words $x_1..x_L$. In that phase the model can only learn *knowledge to
# translate individual words* (KTIW) from bag-of-words co-occurrence; once it
# knows that $i$ translates to $o$, attending to $i$ while emitting $o$ pays
# off, and the attention follows.
#
# **Proxy model (Snell Eq. (5)).** Embeddings $e$ ($|I| \times d$) and an output matrix
# $W$ ($|O| \times d$):
#
# $$p_t = \mathrm{softmax}\Big(\frac1L \sum_{l=1}^{L} W e_{x_l}\Big)\ \text{for every } t,
#   \qquad \mathcal L = -\sum_{(x,y)} \sum_{t=1}^{T} \log p_t[y_t] \quad (14).$$
#
# Its KTIW is read by the probe of Snell Eq. (6),
# $\beta^{px}_{t,l} = \mathrm{softmax}(W e_{x_l})[y_t]$.

# %%
import sys
import time

import numpy as np
from _settings import integer, path, read
from _shared_data import shared_data

from minimal_attn import agreement, ibm1, proxy, proxy_velocity
from minimal_attn.datasets.text import Vocab, labels_as_targets, read_multi30k, read_sst2

S = read(takes="well under a minute", data=("multi30k", "sst2"),
         MULTI30K=path(None, "the Multi30k folder (train.de, train.en); unset: the shared "
                       "data's", folder_exists=True),
         PROXY_PAIRS=integer(3000, "Multi30k training pairs (the count table, EM, the proxy)",
                             low=10),
         PROXY_HELD=integer(300, "held-out pairs the agreement is measured on", low=1),
         PROXY_EPOCHS=integer(4, "epochs of the translation proxy", low=1),
         PROXY_MAX_D=integer(4096, "largest width d of the initial-velocity check (16, 64, "
                             "256, 1024, 4096 up to it)", low=64))
DATA = S.MULTI30K or shared_data("multi30k")
if DATA is None:
    sys.exit("Multi30k not found at ../shared/data/multi30k; set MULTI30K (or "
             "ATTN_DYN_DATA) to the folder with train.de/train.en")

N_TRAIN, N_HELD = S.PROXY_PAIRS, S.PROXY_HELD
t_start = time.perf_counter()
src, tgt = read_multi30k(DATA, "train", src_lang="de", tgt_lang="en",
                         max_pairs=N_TRAIN + N_HELD)
sv = Vocab.build(src[:N_TRAIN], min_count=2)          # German source, <unk> at id 0
tv = Vocab.build(tgt[:N_TRAIN], min_count=2)          # English target
x_tr, y_tr = sv.encode_all(src[:N_TRAIN]), tv.encode_all(tgt[:N_TRAIN])
x_ho, y_ho = sv.encode_all(src[N_TRAIN:]), tv.encode_all(tgt[N_TRAIN:])
print(f"{N_TRAIN} training and {N_HELD} held-out pairs, |I| = {len(sv)}, |O| = {len(tv)}")


# %% [markdown]
# ## The count table (Snell Eq. (16)) and Trans (Snell Eq. (17))
#
# Every output word $o$ of a pair co-occurs with each input position, with
# weight $1/L$ (a word twice in $x$ counts twice):
#
# $$C[i, o] = \sum_{(x, y)} \sum_{t=1}^{T} \sum_{l=1}^{L} \frac{1[y_t = o]\,1[x_l = i]}{L},
#   \qquad \mathrm{Trans}(o \mid i) = \frac{C[i, o]}{\sum_{o'} C[i, o']}.$$
#
# Tables are indexed `[source word i, target word o]` throughout the package.
# Frequent target words ("a", ".") dominate every row of Trans: raw
# co-occurrence is not yet translation.

# %%
def show(table_row, k=4):
    top = np.argsort(table_row)[::-1][:k]
    return ", ".join(f"{tv.itos[o]} {table_row[o]:.2f}" for o in top)


C = ibm1.count_table(x_tr, y_tr, len(sv), len(tv))            # (|I|, |O|)
trans = ibm1.trans_from_counts(C)
WORDS = [w for w in ("hund", "frau", "mann", "rot") if w in sv.stoi]   # all at 3,000 pairs
for word in WORDS:
    print(f"Trans(. | {word:5s}): {show(trans[sv.stoi[word]])}")

# %% [markdown]
# ## IBM Model 1 by EM
#
# EM (Brown et al., 1993) with a NULL source word starts from the uniform
# table; the E-step splits each target token over the source positions in
# proportion to $t(y_j \mid x_i)$, the M-step renormalises per source word.
# Its first E-step from a uniform table (without NULL) *is* $C$. The
# log-likelihood $\sum \log\big(\frac{1}{L+1}\sum_i t(y_j|x_i)\big)$ never
# decreases, and a few iterations explain away the frequent words.

# %%
model = ibm1.train_ibm1(x_tr, y_tr, len(sv), len(tv), iterations=10, null=True)
print("log-likelihood per target word:",
      " ".join(f"{ll / sum(map(len, y_tr)):.3f}" for ll in model.log_likelihood))
em_table = model.to_dense()[:len(sv)]                     # drop the NULL row
for word in WORDS:
    print(f"t(. | {word:5s}) after EM: {show(em_table[sv.stoi[word]])}")

# %% [markdown]
# ## The gradient at initialisation (Section 4.1, Snell Eq. (15))
#
# Under gradient flow from $W, e \sim N(0, I/d)$ the logits $W e_i$ first move
# towards the centred count table:
#
# $$\frac{d}{d\tau} W e_i \Big|_{\tau = 0} = \dot W e_i + W \dot e_i
#   \;\longrightarrow\; 2\big(C[i,:] - \mathrm{mean}_o\, C[i, o]\big) \quad (d \to \infty),$$
#
# since $e_i \cdot e_j \to \delta_{ij}$, $W_o \cdot W_{o'} \to \delta_{oo'}$
# and $p_t \to$ uniform. Each of these is off by $O(1/\sqrt d)$, and so is the
# limit. (A smaller slice keeps the dense $|I| \times |O|$ tables cheap.)

# %%
small_v, small_t = Vocab.build(src[:300], min_count=3), Vocab.build(tgt[:300], min_count=3)
xs, ys = small_v.encode_all(src[:300]), small_t.encode_all(tgt[:300])
dims = [d for d in (16, 64, 256, 1024, 4096) if d <= S.PROXY_MAX_D]
err = proxy_velocity.init_velocity_error(xs, ys, len(small_v), len(small_t), dims, n_seeds=2)
for d, e in zip(dims, err):
    print(f"d = {d:5d}: relative error {e:.4f}   (error * sqrt(d) = {e * np.sqrt(d):.2f})")
print(f"log-log slope {np.polyfit(np.log(dims), np.log(err), 1)[0]:.2f} (1/sqrt(d): -0.5)")

# %% [markdown]
# ## Training the proxy and comparing its probe with IBM Model 1
#
# We train the proxy with Adam on the summed loss (14) and ask, for every
# output word of the held-out pairs, whether the proxy's favourite source
# position is among the top 5% of IBM Model 1's (Snell Eq. (10)):
#
# $$A(u, v) = 1\big[\,|\{l : v_l > v_{\arg\max u}\}| < \lceil 0.05 L \rceil\,\big],$$
#
# with $\beta^{IBM}_{t,l} = \mathrm{Trans}(y_t \mid x_l)$ (Snell Eq. (18)). The random
# baseline $\hat A$ is the chance that a uniformly random position passes. The
# alignment posterior $\alpha^{IBM}$ (Snell Eq. (19)) normalises $\beta^{IBM}$ over $l$,
# so it ranks positions identically and gives the same A.

# %%
cfg = proxy.ProxyConfig(d=64, epochs=S.PROXY_EPOCHS, batch_size=64, lr=0.01, seed=0)
params, history = proxy.train_proxy(x_tr, y_tr, len(sv), len(tv), cfg, val=(x_ho, y_ho))
for rec in history:
    print(f"epoch {rec['epoch']}: train {rec['train_loss']:.3f}, held-out "
          f"{rec['val_loss']:.3f} nats per word")

b_px = [proxy.beta_px(params, x, y) for x, y in zip(x_ho, y_ho)]
for name, table in (("Trans, Snell Eq. (17)", trans), ("EM, 10 iterations", em_table)):
    b_ibm = [ibm1.beta_ibm(table, x, y) for x, y in zip(x_ho, y_ho)]
    res = agreement.average_agreement(b_px, b_ibm)
    print(f"A(beta^px, beta^IBM[{name}]) = {res['agreement']:.3f}  "
          f"(random {res['baseline']:.3f}, Kendall tau {res['kendall_tau']:.3f}, "
          f"{res['n_words']} words)")
b_alpha = [ibm1.alpha_ibm(ibm1.beta_ibm(trans, x, y)) for x, y in zip(x_ho, y_ho)]
print("A with alpha^IBM instead:", f"{agreement.average_agreement(b_px, b_alpha)['agreement']:.3f}")

# %% [markdown]
# The proxy, which never sees word order or attention, points at the same
# source word as IBM Model 1 for most output words, far above the random
# baseline: the knowledge that drives attention is available from
# co-occurrence alone. Snell Eq. (11) then asks how well a *normally* trained model
# must perform before its attention agrees with a reference that much
# (`agreement.contextualised_agreement`); that needs seq2seq checkpoints and is
# left to the torch backend.

# %% [markdown]
# ## Classification is the case T = 1, |O| = 2 (Section 2.4)
#
# A sentiment label is a one-word output. The proxy is then a bag-of-words
# logistic model, and $\beta^{px}_{1,l} = \mathrm{softmax}(W e_{x_l})[y]$ scores
# how much word $x_l$ alone supports the label: the words a trained attention
# classifier will come to attend to.

# %%
sst2 = (shared_data("sst2") or DATA.parent / "sst2") / "train.tsv"
if sst2.is_file():
    sents, labels = read_sst2(sst2)
    sents, labels = sents[:8000], labels[:8000]
    wv = Vocab.build(sents, min_count=3)
    cls_params, _ = proxy.train_proxy(wv.encode_all(sents), labels_as_targets(labels),
                                      len(wv), 2, proxy.ProxyConfig(d=32, epochs=3, lr=0.01))
    positive = proxy.word_translation(cls_params)[:, 1]                 # (|I|,)
    print("most positive words:", ", ".join(wv.itos[i] for i in np.argsort(-positive)[:8]))
    print("most negative words:", ", ".join(wv.itos[i] for i in np.argsort(positive)[:8]))
else:
    print(f"SST-2 not found at {sst2}; skipping the classification case")

# %%
print(f"total time {time.perf_counter() - t_start:.1f} s")
