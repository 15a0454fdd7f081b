r"""Sparse EM for IBM Model 1 (private): the fast path behind :func:`minimal_attn.ibm1.train_ibm1`.

:func:`minimal_attn.ibm1.train_ibm1_dense` is the literal EM; this module
computes the same tables (``tests/test_ibm1.py``) on a sparse, flattened layout
built once by :func:`build_links`: one *link* per (target token, source
position) of every pair, so every occurrence of a repeated word counts, and one
*cell* per distinct co-occurring (source word, target word). An iteration is
three ``take`` gathers and three scatter-adds (``bincount``; a fancy-index
``+=`` would drop repeated indices), written against the array namespace, so
it runs unchanged on CuPy and torch (``_xp.bincount`` falls back to the host
where a namespace has no ``bincount``). Only co-occurring cells can ever get
probability, so a table is stored per cell.

The index building (:func:`build_links`) is host-side NumPy (packed in-place
sort, ``repeat``); its arrays are then moved to the namespace of the EM.
"""

import dataclasses
import itertools

import numpy as np

from minimal_attn._xp import bincount, get_xp
from minimal_attn.errors import InputError, check_ids, check_int_at_least


def _flatten(seqs, n_vocab, side):
    """Concatenate integer sequences: (flat ids (N,), lengths (P,)), ids checked: integers
    (a float id would be truncated to another word) in [0, n_vocab)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    if not lengths.sum():
        return np.zeros(0, dtype=np.int64), lengths
    if isinstance(seqs[0], np.ndarray):
        flat = np.concatenate(seqs)
        # an empty float sentence (np.array([])) among integer ones makes the whole float
        whole = flat.dtype.kind in "iu" or all(np.asarray(s).dtype.kind in "iu"
                                               for s in seqs if len(s))
    else:                       # lists of ints, read at C speed; a float id shows a fraction
        try:
            flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.float64,
                               count=int(lengths.sum()))
        except (TypeError, ValueError):
            flat = np.zeros(1)
            whole = False
        else:
            whole = bool(np.all(flat == np.floor(flat)))
    if not whole:
        raise InputError(f"{side} ids must be integers, got dtype {flat.dtype}; encode the "
                         "words as integer ids (datasets.text.Vocab)")
    return check_ids(flat.astype(np.int64, copy=False), n_vocab, side), lengths


def check_corpus(src, tgt, n_src, n_tgt, null=True):
    """Refuse a parallel corpus the count table or EM cannot read; return its flat ids and
    lengths ``(x (Nx,), L (P,), y (Ny,), T (P,))``.

    One target sentence per source sentence (``zip`` would drop the extra ones silently),
    integer ids in [0, n_src) and [0, n_tgt), and, without the NULL word (``null=False``),
    a source word in every pair with target words (none could explain them).
    """
    n_src = check_int_at_least("n_src", n_src, 1)
    n_tgt = check_int_at_least("n_tgt", n_tgt, 1)
    if len(src) != len(tgt):
        raise InputError(f"{len(src)} source sentences but {len(tgt)} target sentences: give "
                         "one target sentence per source sentence")
    x, L = _flatten(src, n_src, "source")               # (Nx,), (P,)
    y, T = _flatten(tgt, n_tgt, "target")               # (Ny,), (P,)
    if not null and np.any((L == 0) & (T > 0)):
        n = int(np.flatnonzero((L == 0) & (T > 0))[0])
        raise InputError(f"pair {n} has target words but an empty source; "
                         "drop it or use the NULL word")
    return x, L, y, T


def _sort_links(key, tok, n_tok):
    """Sort links by cell: ``(cell_key, link_cell, link_tok)``, ``link_cell`` ascending.

    ``key`` (consumed) is each link's source word * |O| + target word, ``tok``
    its target token. ``cell_key`` holds the distinct keys. Packing ``tok``
    into the low bits of ``key`` and sorting that one int64 array in place is
    several times faster than ``np.argsort``; it falls back to argsort when the
    packed value would overflow int64.
    """
    bits = max(int(n_tok - 1).bit_length(), 1)
    if key.size and int(key.max()).bit_length() + bits <= 62:
        key <<= bits
        key |= tok
        key.sort()
        link_tok = key & ((1 << bits) - 1)
        key >>= bits
    else:
        order = np.argsort(key, kind="stable")
        key, link_tok = key[order], tok[order]
    new = np.ones(key.size, dtype=bool)                    # first link of each cell
    np.not_equal(key[1:], key[:-1], out=new[1:])
    link_cell = np.cumsum(new)
    link_cell -= 1
    return key[new], link_cell, link_tok


@dataclasses.dataclass
class Links:
    """Flattened (pair, target token, source position) index arrays, built once."""

    link_cell: object   # (n_links,) cell of each link
    link_tok: object    # (n_links,) global index of the link's target token
    cell_src: object    # (n_cells,) source word of each cell (|I| = NULL)
    cell_tgt: object    # (n_cells,) target word of each cell
    tok_len: object     # (n_tok,) L' (source length, +1 with NULL) of each target token
    log_len_sum: float  # sum over target tokens of log L' (the 1/L' of the likelihood)
    n_tok: int
    n_rows: int         # |I| (+1 with NULL)
    n_tgt: int

    @property
    def n_cells(self):
        return int(self.cell_src.shape[0])


def build_links(src, tgt, n_src, n_tgt, null=True, xp=np):
    """Index arrays for EM over all pairs, vectorised (no loop over tokens).

    Parameters
    ----------
    src, tgt : sequences of int arrays   source / target ids of each pair
    n_src, n_tgt : int                   vocabulary sizes |I|, |O|
    null : bool                          prepend the NULL word (id ``n_src``)
    xp : module                          numpy or cupy, for the returned arrays
    """
    x, L, y, T = check_corpus(src, tgt, n_src, n_tgt, null)   # (Nx,), (P,), (Ny,), (P,)
    P = len(L)
    if null:                                            # NULL in front of each sentence
        Lp = L + 1
        x_null = np.full(int(Lp.sum()), n_src, dtype=np.int64)
        x_null[np.arange(x.size) + np.repeat(np.arange(1, P + 1), L)] = x
        x = x_null
    else:
        Lp = L
    # Links are grouped by target token: token j of pair k owns the Lp[k] links to
    # every source position of pair k, in order. Built from repeats, no division.
    tok_len = np.repeat(Lp, T)                          # (n_tok,) L' of each target token
    link_start = np.cumsum(tok_len) - tok_len           # (n_tok,) its first link
    src_start = np.repeat(np.cumsum(Lp) - Lp, T)        # (n_tok,) its pair's first source slot
    n_links = int(tok_len.sum())
    key = np.repeat(src_start - link_start, tok_len)    # (n_links,) in-place steps below
    key += np.arange(n_links)                           # source slot of each link
    key = x[key]                                        # source word of each link
    key *= n_tgt
    key += np.repeat(y, tok_len)                        # source word * |O| + target word
    # Sorting the links by cell makes the two per-cell passes of EM (gather the
    # table, accumulate counts) sequential in memory: about 2x faster EM.
    cell_key, link_cell, link_tok = _sort_links(
        key, np.repeat(np.arange(y.size), tok_len), y.size)
    return Links(link_cell=xp.asarray(link_cell), link_tok=xp.asarray(link_tok),
                 tok_len=xp.asarray(tok_len),
                 cell_src=xp.asarray(cell_key // n_tgt), cell_tgt=xp.asarray(cell_key % n_tgt),
                 log_len_sum=float(np.log(np.maximum(tok_len, 1)).sum()),
                 n_tok=int(y.size), n_rows=n_src + int(null), n_tgt=n_tgt)


def e_step(links, prob):
    r"""Expected counts of every cell and the log-likelihood of ``prob`` (Brown et al., 1993).

    The E-step of :func:`minimal_attn.ibm1.train_ibm1_dense`, per cell.

    For target token :math:`y_j`, the posterior over source positions is
    :math:`t(y_j|x_i) / \sum_{i'} t(y_j|x_{i'})`; each link adds its posterior
    to its cell. ``prob`` is the per-cell table, shape (n_cells,).

    Returns
    -------
    counts : array, shape (n_cells,)
    loglik : float   the log-likelihood of the module docstring, for ``prob``
    """
    xp = get_xp(prob)
    w = xp.take(prob, links.link_cell)                                     # (n_links,)
    z = bincount(xp, links.link_tok, w, links.n_tok)                       # (n_tok,)
    with np.errstate(divide="ignore"):
        loglik = float(xp.sum(xp.log(z))) - links.log_len_sum
    inv_z = 1.0 / xp.where(z > 0, z, xp.ones_like(z))                      # (n_tok,)
    # sum over links of t(y|x) / z_j = t(y|x) * (sum over links of 1 / z_j): the
    # per-link posterior is never formed, one pass over the links fewer.
    counts = prob * bincount(xp, links.link_cell, xp.take(inv_z, links.link_tok),
                             links.n_cells)                                # (n_cells,)
    return counts, loglik


def log_likelihood(links, prob):
    """The log-likelihood of the module docstring for the per-cell table ``prob``."""
    xp = get_xp(prob)
    z = bincount(xp, links.link_tok, xp.take(prob, links.link_cell), links.n_tok)
    with np.errstate(divide="ignore"):
        return float(xp.sum(xp.log(z))) - links.log_len_sum


def m_step(links, counts):
    """Normalise expected counts over targets for each source word: t(o|i), per cell."""
    xp = get_xp(counts)
    total = bincount(xp, links.cell_src, counts, links.n_rows)             # (n_rows,)
    return counts / xp.take(total, links.cell_src)
