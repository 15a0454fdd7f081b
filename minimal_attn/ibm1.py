r"""IBM Model 1: the count table, Snell Eqs. (16)-(19), and Brown et al.'s EM.

Snell, Zhong, Klein & Steinhardt (2021), Section 4 and Appendix A.2 (Eq. (52)).
Orientation, used everywhere in this package: a table is indexed
``[source word i, target word o]``, shape ``(|I|, |O|)``, and a translation
table sums to 1 over targets, ``table[i, o] = t(o | i)``. The source predicts
the target. With the NULL source word (Brown et al., 1993) the table gets one
extra row, ``i = |I|`` (:attr:`IBM1Model.null_id`), and NULL sits in front of
every source sentence. Sentences are integer arrays (ids from
:class:`minimal_attn.datasets.text.Vocab`).

This file holds the definitions: Snell Eq. (16) :func:`count_table`, Snell Eq. (17)
:func:`trans_from_counts`, Snell Eq. (18) :func:`beta_ibm`, Snell Eq. (19)
:func:`alpha_ibm`, and the EM written literally (:func:`train_ibm1_dense`).
:func:`train_ibm1` runs the same EM on a sparse layout (private module
``_ibm1_sparse``), tested equal to the literal one.

The log-likelihood reported per iteration is

.. math:: \log P(y \mid x) = \sum_{\text{pairs}} \sum_{j=1}^{T}
          \log \Big( \frac{1}{L'} \sum_{i} t(y_j \mid x_i) \Big),

with :math:`L' = L + 1` with NULL (:math:`L` without) and the source positions
``i`` including NULL; the constant length term :math:`\log\epsilon` is left
out. EM never decreases it.
"""

import dataclasses

import numpy as np

from minimal_attn._ibm1_sparse import build_links, check_corpus, e_step, log_likelihood, m_step
from minimal_attn._xp import get_xp, like, namespace, to_numpy
from minimal_attn.errors import check_ids, check_int_at_least

NULL_WORD = "<NULL>"


# ------------------------------------------------------- Snell Eqs. (16)-(19), as defined
def count_table(src, tgt, n_src, n_tgt, xp=np):
    r"""The co-occurrence count table, Snell Eq. (16): add :math:`1/L` for every (x_l, y_t) pair.

    .. math:: C[i, o] = \sum_{(x, y)} \sum_{t=1}^{T} \sum_{l=1}^{L}
              \frac{1[y_t = o]\, 1[x_l = i]}{L}

    Every occurrence counts: a word twice in ``x`` adds ``2/L``. Shape (|I|, |O|).
    It equals the expected counts of the first EM E-step from a uniform table
    without NULL.
    """
    check_corpus(src, tgt, n_src, n_tgt)             # one target per source, ids in range
    C = np.zeros((n_src, n_tgt))
    for x, y in zip(src, tgt):
        x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
        if x.size:                                        # an empty x adds nothing
            np.add.at(C, (x[:, None], y[None, :]), 1.0 / x.size)      # Snell Eq. (16)
    return like(namespace(xp), C)                                      # (|I|, |O|)


def trans_from_counts(C):
    r"""Trans(o|i), Snell Eq. (17): the count table normalised over targets for each source word.

    .. math:: \mathrm{Trans}(o \mid i) = C[i, o] / \sum_{o'} C[i, o']

    Rows of never-seen source words stay zero. Equals one EM iteration (no NULL)
    from a uniform table.
    """
    xp = get_xp(C)
    total = xp.sum(C, axis=1, keepdims=True)                              # (|I|, 1)
    return C / xp.where(total > 0, total, xp.ones_like(total))            # Snell Eq. (17)


def beta_ibm(trans, x, y):
    r"""The IBM probe, Snell Eq. (18): :math:`\beta^{IBM}_{t,l} = \mathrm{Trans}(y_t \mid x_l)`.

    Parameters
    ----------
    trans : array (|I|, |O|) or IBM1Model   Snell Eq. (17), or an EM table (its NULL row unused)
    x : int array, shape (L,)               source ids
    y : int array, shape (T,)               target ids

    Returns
    -------
    array, shape (T, L)
    """
    if isinstance(trans, IBM1Model):
        xp = get_xp(trans.prob)
        x, y = like(xp, x, trans.prob), like(xp, y, trans.prob)
        return trans.lookup(x[None, :], y[:, None])
    xp = get_xp(trans)
    check_ids(to_numpy(x), trans.shape[0], "source")
    check_ids(to_numpy(y), trans.shape[1], "target")
    x, y = like(xp, x, trans), like(xp, y, trans)
    return xp.take(xp.take(trans, x, axis=0), y, axis=1).T                # Snell Eq. (18)


def alpha_ibm(beta):
    r"""IBM Model 1 alignment posterior, Snell Eq. (19): beta^IBM normalised over positions.

    .. math:: \alpha^{IBM}_{t,l} = \beta^{IBM}_{t,l} / \sum_{l'} \beta^{IBM}_{t,l'}

    A row that is all zero becomes uniform. Shape (T, L) in and out.
    """
    xp = get_xp(beta)
    total = xp.sum(beta, axis=-1, keepdims=True)                          # (T, 1)
    L = beta.shape[-1]
    safe = xp.where(total > 0, total, xp.ones_like(total))
    return xp.where(total > 0, beta / safe, xp.full_like(beta, 1.0 / max(L, 1)))  # Snell Eq. (19)


# ------------------------------------------------------- EM, literally
def train_ibm1_dense(src, tgt, n_src, n_tgt, iterations=5, null=True):
    r"""Brown et al.'s EM for IBM Model 1, written as the definition (dense, pair by pair).

    E-step: for target word :math:`y_j` of a pair, the posterior over its source
    positions is :math:`t(y_j|x_i) / \sum_{i'} t(y_j|x_{i'})`; each adds to the
    expected count of :math:`(x_i, y_j)`. M-step: normalise the counts over
    targets. Starts from the uniform table; rows never seen keep it. For
    reading and testing; :func:`train_ibm1` is the fast equivalent.

    Returns
    -------
    table : array (|I| (+1 with NULL), |O|)   t(o | i)
    log_likelihood : list of iterations + 1 floats (module docstring)
    """
    iterations = check_int_at_least("iterations", iterations, 0)
    check_corpus(src, tgt, n_src, n_tgt, null)       # the checks of train_ibm1, the same
    rows = n_src + int(null)
    t = np.full((rows, n_tgt), 1.0 / n_tgt)
    history = []
    for k in range(iterations + 1):
        counts, loglik = np.zeros((rows, n_tgt)), 0.0
        for x, y in zip(src, tgt):
            xs = np.concatenate([[n_src], x]).astype(np.int64) if null else np.asarray(x)
            y = np.asarray(y, dtype=np.int64)
            t_pair = t[xs[:, None], y[None, :]]                   # (L', T) t(y_j | x_i)
            z = t_pair.sum(axis=0)                                # (T,)
            loglik += float(np.sum(np.log(z / xs.size)))
            np.add.at(counts, (xs[:, None], y[None, :]), t_pair / z)     # E-step
        history.append(loglik)
        if k == iterations:
            break
        total = counts.sum(axis=1, keepdims=True)
        t = np.where(total > 0, counts / np.where(total > 0, total, 1.0), t)   # M-step
    return t, history


# ------------------------------------------------------- EM, fast
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
        """The table as a dense array, shape (|I| (+1 with NULL), |O|).

        After one EM iteration or more, the rows of source words that co-occur with a
        target word sum to 1 (with ``iterations=0`` the co-occurring cells hold the uniform
        start 1/|O|, so a row sums to less); a pair that never co-occurred is 0, and so is
        the whole row of a word that meets no target word (as :func:`trans_from_counts`,
        Snell Eq. (17); :func:`train_ibm1_dense` leaves such a row at its uniform start
        instead, which EM never updates).

        Filled on the host (the array API has no scatter), returned in the table's namespace.
        """
        out = np.zeros((self.n_src + int(self.null), self.n_tgt))
        out[to_numpy(self.cell_src), to_numpy(self.cell_tgt)] = to_numpy(self.prob)  # distinct
        return like(get_xp(self.prob), out, self.prob)

    def lookup(self, src_ids, tgt_ids):
        """t(tgt | src) for broadcastable id arrays; 0 where the words never co-occurred.

        Ids out of range are refused: the flat key src * |O| + tgt of ``tgt >= |O|`` is
        another cell's."""
        check_ids(to_numpy(src_ids), self.n_src + int(self.null), "source")
        check_ids(to_numpy(tgt_ids), self.n_tgt, "target")
        xp = get_xp(self.prob)
        if self._keys is None:                   # cells are sorted by (src, tgt) by build_links
            self._keys = self.cell_src * self.n_tgt + self.cell_tgt
        q = like(xp, src_ids, self.prob) * self.n_tgt + like(xp, tgt_ids, self.prob)
        shape = q.shape
        q = xp.reshape(q, (-1,))
        pos = xp.searchsorted(self._keys, q)
        pos = xp.where(pos < self._keys.shape[0], pos, xp.zeros_like(pos))  # past the end: miss
        hit = xp.take(self._keys, pos) == q
        found = xp.where(hit, xp.take(self.prob, pos), xp.zeros_like(self.prob[:1]))
        return xp.reshape(found, shape)

    def entries(self):
        """NumPy ``(src ids, tgt ids, prob)`` of every non-zero entry, sorted by (src, tgt)."""
        keep = to_numpy(self.prob) > 0
        return (to_numpy(self.cell_src)[keep], to_numpy(self.cell_tgt)[keep],
                to_numpy(self.prob)[keep])


def train_ibm1(src, tgt, n_src, n_tgt, iterations=5, null=True, xp=np, callback=None):
    """Train IBM Model 1 with EM from the uniform table ``t(o|i) = 1/|O|`` (as NLTK does).

    The EM of :func:`train_ibm1_dense` on the sparse layout of the private
    ``_ibm1_sparse`` module (equal on every pair of words that co-occur, tested; see
    :meth:`IBM1Model.to_dense` for the others), fast enough for Multi30k
    and runnable on a GPU through ``xp`` (``numpy``, ``cupy``, ``torch``, any
    array-API namespace).

    Parameters
    ----------
    src, tgt : sequences of int arrays   one pair per index; the source predicts the target
    iterations : int                     EM iterations (>= 0)
    null : bool                          add the NULL source word
    xp : module                          array namespace of the EM (default NumPy)
    callback : callable(k, loglik)       called after iteration k with the new table's
                                         log-likelihood (progress bars)

    Returns
    -------
    IBM1Model   with ``log_likelihood`` of length ``iterations + 1``
    """
    iterations = check_int_at_least("iterations", iterations, 0)
    xp = namespace(xp)
    links = build_links(src, tgt, n_src, n_tgt, null=null, xp=xp)
    prob = xp.full((links.n_cells,), 1.0 / n_tgt, dtype=xp.float64)   # (n_cells,)
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
