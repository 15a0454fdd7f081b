r"""HateXplain posts as padded arrays, and their per-post SAIF summaries (V&R Sec. 5, A.3).

:func:`encode_splits` builds the word vocabulary on the training split and pads every
split to (N, L) arrays with a boolean mask; :func:`foreground_focus` is
:math:`a_{z^*} = \sum_{z \in z^*} a_z`, the focus on the rationale, and
:func:`summarise_posts` the accuracy over all posts with SAIF over those with a rationale.
The posts come from :func:`.hatexplain.read_hatexplain` (which re-exports these names).
"""

from dataclasses import dataclass

import numpy as np

from minimal_attn import saif
from minimal_attn.datasets.text import UNK, Vocab
from minimal_attn.errors import InputError, check_int_at_least

PAD = "<pad>"


@dataclass
class Encoded:
    """A padded split: ids (N, L), mask (N, L), rationale (N, L), labels (N,)."""

    ids: np.ndarray                        # (N, L) int64, PAD where mask is False
    mask: np.ndarray                       # (N, L) bool, True on real tokens
    rationale: np.ndarray                  # (N, L) bool, the true foreground z*
    y: np.ndarray                          # (N,) int64


def pad(sequences, length, fill=0, dtype=np.int64):
    """Stack ``sequences`` into (N, length), cut at ``length``, filled with ``fill``."""
    out = np.full((len(sequences), length), fill, dtype=dtype)             # (N, L)
    for n, seq in enumerate(sequences):
        k = min(len(seq), length)
        out[n, :k] = seq[:k]
    return out


def encode_splits(data, min_count=2, max_len=None):
    """Vocabulary from the training split and every split padded, Appendix A.3.

    ``<pad>`` is id 0 and ``<unk>`` id 1; words seen fewer than ``min_count``
    times in the training split become ``<unk>``, and so does a post's literal
    ``<pad>`` or ``<unk>`` (an ordinary word, never the padding, which the mask
    alone marks). Posts longer than ``max_len`` (None or an int >= 1) are cut.

    Returns
    -------
    vocab : minimal_attn.datasets.text.Vocab
    encoded : dict split -> Encoded
    """
    if max_len is not None:
        max_len = check_int_at_least("max_len", max_len, 1, param="max_len")
    tokens = {name: [[UNK if w == PAD else w for w in t] if PAD in t else t
                     for t in posts.tokens] for name, posts in data.splits.items()}
    words = Vocab.build(tokens["train"], min_count=min_count)
    if len(words) == 1:                                     # <unk> alone
        raise InputError(f"no word occurs min_count = {min_count} times in the training "
                         "posts, so every word would be <unk>; lower min_count",
                         param="min_count")
    vocab = Vocab([PAD] + words.itos)
    encoded = {}
    for name, posts in data.splits.items():
        lengths = np.array([len(t) for t in posts.tokens], dtype=np.int64)
        length = int(lengths.max(initial=1)) if max_len is None else max_len
        mask = np.arange(length)[None, :] < lengths[:, None]                # (N, L)
        encoded[name] = Encoded(pad(vocab.encode_all(tokens[name]), length), mask,
                                pad(posts.rationale, length, dtype=bool), posts.y)
    return vocab, encoded


def foreground_focus(a, rationale):
    r""":math:`a_{z^*} = \sum_{z \in z^*} a_z` per post, V&R Section 5.

    ``a`` (N, L) attention (zero on padding), ``rationale`` (N, L) 0/1 or bool.
    Returns (N,); 0 for a post without a rationale.
    """
    a = np.asarray(a, dtype=np.float64)
    rationale = np.asarray(rationale, dtype=bool)
    if a.shape != rationale.shape:
        raise InputError(f"attention {a.shape} and rationale {rationale.shape} must match")
    return np.where(rationale, a, 0.0).sum(axis=1)                          # (N,)


def summarise_posts(a, s, y, rationale, threshold=0.8, bins=5):
    """Accuracy over all posts; SAIF, focus-prediction fractions and heat map over rationale posts.

    ``a`` (N, L) attention, ``s`` (N, C) class scores of the inference rule.
    The dict has the keys of :func:`minimal_attn.saif.summarise` plus
    ``n_posts`` (all) and ``n_without_rationale`` (left out of SAIF);
    ``n`` counts the posts that enter SAIF.
    """
    s = np.asarray(s, dtype=np.float64)
    y = np.asarray(y).reshape(-1)
    a_z = np.clip(foreground_focus(a, rationale), 0.0, 1.0)                # (N,)
    s_y = s[np.arange(len(y)), y]                                           # (N,)
    has = np.asarray(rationale, dtype=bool).any(axis=1)                     # (N,)
    counts = saif.focus_prediction_counts(a_z[has], s_y[has], threshold)
    n = int(has.sum())
    out = {"n": n, "n_posts": int(len(y)), "n_without_rationale": int(len(y) - n),
           "accuracy": float(np.mean(s.argmax(axis=1) == y)) if len(y) else float("nan"),
           "saif": float(counts["saif"])}
    out.update({k: counts[k] / n if n else float("nan") for k in saif.COUNT_KEYS})
    out["threshold"] = float(threshold)
    out["heatmap"] = saif.heatmap(a_z[has], s_y[has], bins).tolist()
    return out, {"a_z": a_z, "s_y": s_y, "has_rationale": has}
