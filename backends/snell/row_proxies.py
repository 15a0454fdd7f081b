r"""The proxies of a Table 2 row: beta^px of the bag-of-words proxy (Snell Eqs. (5)-(6)) and
beta^log of the logistic proxy (Snell Eq. (55)), fitted on the row's token ids and cached
in ``proxy.npz`` / ``logistic.npz`` under a key of what they depend on, so a rerun (or a
worker, :mod:`.workers`) reuses them. Used by :mod:`.agreement`.
"""

import numpy as np

from minimal_attn import logistic_proxy, proxy
from minimal_attn._proxy_fast import beta_px_rows
from minimal_attn.backends.snell.run_files import load_rows, save_rows
from minimal_attn.backends.torch_backend import get_device
from minimal_attn.experiments.checkpoints import data_fingerprint, load_guarded

CACHES = ("proxy.npz", "logistic.npz")


def read_cache(path):
    """The rows cached at ``path`` (None if absent); a damaged cache is refused in one line."""
    return load_guarded(path, load_rows, lambda r: None if "key" in r else "not a cache",
                        what="cached proxy", fix="delete it to fit the proxy again", prev=False)


#: How :func:`minimal_attn.logistic_proxy.fit_logistic_sweep` chooses among penalties, as
#: part of the logistic cache's key (a cache of another rule is fitted again).
LOGISTIC_RULE = "best-val-accuracy,ties-to-larger-lambda,gtol-lambda/100"


def proxy_key(task, c):
    """What the cached proxies depend on: the token ids themselves (not only their counts)."""
    return data_fingerprint(data_fingerprint(task), task.info, c.proxy_d, c.proxy_epochs,
                            c.seed, c.train_eval)


def cached_rows(path, key, compute):
    """``compute()`` saved at ``path`` with ``key``; reused when the key matches."""
    rows = read_cache(path)
    if rows is not None and str(rows["key"]) == key:
        return rows
    rows = compute()
    save_rows(path, {**rows, "key": np.array(key)})
    return rows


def splits(task, c):
    out = {"val": (task.val_src, task.val_tgt)}
    if c.train_eval:
        out["train"] = (task.train_src[:c.train_eval], task.train_tgt[:c.train_eval])
    return out


def proxy_rows(task, c):
    """beta^px per pair of each split; the proxy trained in float64 on ``c.device`` (its
    dense Adam over the (|I|, d) embeddings is the bulk of the work)."""
    import torch

    device = get_device(c.device, param="device")
    like_array = None if device.type == "cpu" else torch.zeros(0, dtype=torch.float64,
                                                               device=device)
    params, _ = proxy.train_proxy(task.train_src, task.train_tgt, task.n_vocab, task.n_out,
                                  proxy.ProxyConfig(d=c.proxy_d, epochs=c.proxy_epochs,
                                                    seed=c.seed),
                                  val=(task.val_src, task.val_tgt), like_array=like_array)
    # = [proxy.beta_px(params, x, y) for x, y in pairs], in one gather
    return {f"{name}_beta_px": beta_px_rows(params, *pairs)
            for name, pairs in splits(task, c).items()}


def logistic_args(task):                    # of logistic_proxy.fit_logistic_sweep
    return (task.train_src, [int(t[0]) for t in task.train_tgt], task.val_src,
            [int(t[0]) for t in task.val_tgt], task.n_vocab)


def logistic_rows(task, c):
    """beta^log rows of each split, from the penalty sweep of A.10 (host-side L-BFGS)."""
    B, info = logistic_proxy.fit_logistic_sweep(*logistic_args(task))
    rows = {f"{name}_beta_log": [logistic_proxy.beta_log(B, x, t) for x, t in zip(*pairs)]
            for name, pairs in splits(task, c).items()}
    return {**rows, "lambda": np.array(info["lambda"]),
            "val_accuracy": np.array(info["val_accuracy"])}
