r"""IBM Model 1: the count table, Eqs. (16)-(19) of Snell et al. (2021), and Brown et al.'s EM.

Orientation, used everywhere in this package: a table is indexed
``[source word i, target word o]``, shape ``(|I|, |O|)``, and a translation
table sums to 1 over targets, ``table[i, o] = t(o | i)``. The source predicts
the target. With the NULL source word (Brown et al., 1993) the table gets one
extra row, ``i = |I|`` (:attr:`IBM1Model.null_id`), and NULL sits in front of
every source sentence.

Sentences are integer arrays (ids from :class:`minimal_attn.text_data.Vocab`).
EM runs on a sparse, flattened layout built once by :func:`build_links`: one
*link* per (target token, source position) of every pair, so every occurrence
of a repeated word counts, and one *cell* per distinct co-occurring
(source word, target word). An iteration is three ``take`` gathers and three
``bincount`` sums (no fancy-index ``+=``, which would drop repeated indices),
written against the array namespace ``xp``, so it runs unchanged on CuPy. Only
co-occurring cells can ever get probability, so the table is stored as
``(cell_src, cell_tgt, prob)``; :meth:`IBM1Model.to_dense` expands it for small
vocabularies.

The log-likelihood reported per iteration is

.. math:: \log P(y \mid x) = \sum_{\text{pairs}} \sum_{j=1}^{T}
          \log \Big( \frac{1}{L'} \sum_{i} t(y_j \mid x_i) \Big),

with :math:`L' = L + 1` with NULL (:math:`L` without) and the source positions
``i`` including NULL; the constant length term :math:`\log\epsilon` is left
out. EM never decreases it.
"""

import dataclasses
import itertools

import numpy as np

from ._xp import get_xp, to_numpy
from .errors import InputError, check_int_at_least

NULL_WORD = "<NULL>"


def _flatten(seqs, n_vocab, side):
    """Concatenate integer sequences: (flat ids (N,), lengths (P,)), ids checked."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    if not lengths.sum():
        flat = np.zeros(0, dtype=np.int64)
    elif isinstance(seqs[0], np.ndarray):
        flat = np.concatenate(seqs).astype(np.int64, copy=False)
    else:                                               # lists of ints
        flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64,
                           count=int(lengths.sum()))
    if flat.size and (flat.min() < 0 or flat.max() >= n_vocab):
        raise InputError(f"{side} ids must lie in [0, {n_vocab}); got "
                         f"{int(flat.min())}..{int(flat.max())}")
    return flat, lengths


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
    if len(src) != len(tgt):
        raise InputError(f"{len(src)} source sentences but {len(tgt)} target sentences")
    x, L = _flatten(src, n_src, "source")               # (Nx,), (P,)
    y, T = _flatten(tgt, n_tgt, "target")               # (Ny,), (P,)
    P = len(L)
    if not null and np.any((L == 0) & (T > 0)):
        n = int(np.flatnonzero((L == 0) & (T > 0))[0])
        raise InputError(f"pair {n} has target words but an empty source; "
                         "drop it or use the NULL word")
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
    z = xp.bincount(links.link_tok, weights=w, minlength=links.n_tok)      # (n_tok,)
    with np.errstate(divide="ignore"):
        loglik = float(xp.sum(xp.log(z))) - links.log_len_sum
    inv_z = 1.0 / xp.where(z > 0, z, 1.0)                                  # (n_tok,)
    # sum over links of t(y|x) / z_j = t(y|x) * (sum over links of 1 / z_j): the
    # per-link posterior is never formed, one pass over the links fewer.
    counts = prob * xp.bincount(links.link_cell, weights=xp.take(inv_z, links.link_tok),
                                minlength=links.n_cells)                   # (n_cells,)
    return counts, loglik


def log_likelihood(links, prob):
    """The log-likelihood of the module docstring for the per-cell table ``prob``."""
    xp = get_xp(prob)
    z = xp.bincount(links.link_tok, weights=xp.take(prob, links.link_cell),
                    minlength=links.n_tok)
    with np.errstate(divide="ignore"):
        return float(xp.sum(xp.log(z))) - links.log_len_sum


def m_step(links, counts):
    """Normalise expected counts over targets for each source word: t(o|i), per cell."""
    xp = get_xp(counts)
    total = xp.bincount(links.cell_src, weights=counts, minlength=links.n_rows)  # (n_rows,)
    return counts / xp.take(total, links.cell_src)


@dataclasses.dataclass
class IBM1Model:
    """A trained sparse IBM Model 1 table ``t(o | i)`` and its training curve."""

    cell_src: object        # (n_cells,) source ids; n_src is NULL
    cell_tgt: object        # (n_cells,) target ids
    prob: object            # (n_cells,) t(tgt | src)
    n_src: int
    n_tgt: int
    null: bool
    log_likelihood: list    # [0]: the initial uniform table, [k]: after iteration k
    _keys: object = dataclasses.field(default=None, repr=False)  # lookup cache

    @property
    def null_id(self):
        """Row of the NULL word, or None when trained without it."""
        return self.n_src if self.null else None

    def to_dense(self):
        """The table as a dense array, shape (|I| (+1 with NULL), |O|); rows sum to 1."""
        xp = get_xp(self.prob)
        out = xp.zeros((self.n_src + int(self.null), self.n_tgt))
        out[self.cell_src, self.cell_tgt] = self.prob   # cells are distinct: no accumulation
        return out

    def lookup(self, src_ids, tgt_ids):
        """t(tgt | src) for broadcastable id arrays; 0 where the words never co-occurred."""
        xp = get_xp(self.prob)
        if self._keys is None:                   # cells are sorted by (src, tgt) by build_links
            self._keys = self.cell_src * self.n_tgt + self.cell_tgt
        q = xp.asarray(src_ids) * self.n_tgt + xp.asarray(tgt_ids)
        pos = xp.minimum(xp.searchsorted(self._keys, q), self._keys.shape[0] - 1)
        return xp.where(self._keys[pos] == q, self.prob[pos], 0.0)

    def entries(self):
        """NumPy ``(src ids, tgt ids, prob)`` of every non-zero entry, sorted by (src, tgt)."""
        keep = to_numpy(self.prob) > 0
        return (to_numpy(self.cell_src)[keep], to_numpy(self.cell_tgt)[keep],
                to_numpy(self.prob)[keep])


def train_ibm1(src, tgt, n_src, n_tgt, iterations=5, null=True, xp=np, callback=None):
    """Train IBM Model 1 with EM from the uniform table ``t(o|i) = 1/|O|`` (as NLTK does).

    Parameters
    ----------
    src, tgt : sequences of int arrays   one pair per index; the source predicts the target
    iterations : int                     EM iterations (>= 0)
    null : bool                          add the NULL source word
    callback : callable(k, loglik)       called after iteration k with the new table's
                                         log-likelihood (progress bars)

    Returns
    -------
    IBM1Model   with ``log_likelihood`` of length ``iterations + 1``
    """
    iterations = check_int_at_least("iterations", iterations, 0)
    links = build_links(src, tgt, n_src, n_tgt, null=null, xp=xp)
    prob = xp.full(links.n_cells, 1.0 / n_tgt)                 # (n_cells,)
    counts, loglik = e_step(links, prob)
    history = [loglik]
    for k in range(1, iterations + 1):
        prob = m_step(links, counts)
        if k < iterations:
            counts, loglik = e_step(links, prob)
        else:                                                  # no counts needed after the last
            loglik = log_likelihood(links, prob)
        history.append(loglik)
        if callback is not None:
            callback(k, loglik)
    return IBM1Model(links.cell_src, links.cell_tgt, prob, n_src, n_tgt, bool(null), history)


# ------------------------------------------------------- Eqs. (16)-(19), dense
def count_table(src, tgt, n_src, n_tgt, xp=np):
    r"""The co-occurrence count table, Eq. (16): add :math:`1/L` for every (x_l, y_t) pair.

    .. math:: C[i, o] = \sum_{(x, y)} \sum_{t=1}^{T} \sum_{l=1}^{L}
              \frac{1[y_t = o]\, 1[x_l = i]}{L}

    Every occurrence counts: a word twice in ``x`` adds ``2/L``. Shape (|I|, |O|).
    It equals the expected counts of the first EM E-step from a uniform table
    without NULL (see :func:`e_step`).
    """
    keep = [n for n in range(len(src)) if len(src[n])]     # an empty x adds nothing
    links = build_links([src[n] for n in keep], [tgt[n] for n in keep], n_src, n_tgt,
                        null=False, xp=np)
    w = 1.0 / np.take(links.tok_len, links.link_tok)                       # (n_links,) 1/L
    cells = np.bincount(links.link_cell, weights=w, minlength=links.n_cells)
    C = np.zeros(n_src * n_tgt)
    np.add.at(C, links.cell_src * n_tgt + links.cell_tgt, cells)           # cells are distinct
    return xp.asarray(C.reshape(n_src, n_tgt))                             # (|I|, |O|)


def trans_from_counts(C):
    r"""Trans(o|i), Eq. (17): the count table normalised over targets for each source word.

    .. math:: \mathrm{Trans}(o \mid i) = C[i, o] / \sum_{o'} C[i, o']

    Rows of never-seen source words stay zero. Equals one EM iteration (no NULL)
    from a uniform table.
    """
    xp = get_xp(C)
    total = C.sum(axis=1, keepdims=True)                  # (|I|, 1)
    return C / xp.where(total > 0, total, 1.0)


def beta_ibm(trans, x, y):
    r"""The IBM probe, Eq. (18): :math:`\beta^{IBM}_{t,l} = \mathrm{Trans}(y_t \mid x_l)`.

    Parameters
    ----------
    trans : array (|I|, |O|) or IBM1Model   Eq. (17), or an EM table (its NULL row unused)
    x : int array, shape (L,)               source ids
    y : int array, shape (T,)               target ids

    Returns
    -------
    array, shape (T, L)
    """
    if isinstance(trans, IBM1Model):
        xp = get_xp(trans.prob)
        return trans.lookup(xp.asarray(x)[None, :], xp.asarray(y)[:, None])
    xp = get_xp(trans)
    x, y = xp.asarray(x), xp.asarray(y)
    return trans[x[None, :], y[:, None]]                   # (T, L)


def alpha_ibm(beta):
    r"""IBM Model 1 alignment posterior, Eq. (19): :math:`\beta^{IBM}` normalised over positions.

    .. math:: \alpha^{IBM}_{t,l} = \beta^{IBM}_{t,l} / \sum_{l'} \beta^{IBM}_{t,l'}

    A row that is all zero becomes uniform. Shape (T, L) in and out.
    """
    xp = get_xp(beta)
    total = beta.sum(axis=-1, keepdims=True)               # (T, 1)
    L = beta.shape[-1]
    return xp.where(total > 0, beta / xp.where(total > 0, total, 1.0), 1.0 / max(L, 1))
