r"""Seeded generators of the synthetic tasks of Snell et al. (2021), Sections 3.3, 6.1, 6.2, A.3.

Words are integers ``1..V`` as in the paper ("the keyword 1"); id ``0`` is
reserved for the decoder's start symbol, so a model needs ``V + 1`` ids.
Every generator takes a ``numpy.random.Generator`` and returns int64 arrays:

* ``(src, tgt)`` of shape ``(n, L)`` for the seq2seq tasks (``tgt`` is the output
  sequence the decoder must emit);
* ``(x, y, l_star)`` for the keyword task (``y`` in {0, 1}, ``l_star`` the
  0-based keyword position, -1 in negatives).

:func:`batch_stream` names one reproducible stream per (task, condition, seed):
batch ``k`` depends only on ``(seed, k)``, so a resumed run draws the same
batches as an uninterrupted one, and one seed's data never depends on how many
other seeds are trained beside it.
"""

import math
import numbers

import numpy as np

from minimal_attn.errors import InputError, check_int_at_least
from minimal_attn.ibm1 import beta_ibm, count_table, trans_from_counts

#: Section 3.3 / 6.2: 40 positions, vocabularies of 40 and 60 types.
LENGTH = 40
N_CONTROL_VOCAB = 60
KEYWORD = 1
#: keyword_classification refuses settings whose rejection sampler would draw more words
#: than this on average (about a minute of NumPy): a class too rare to fill (the keyword
#: exactly once, or not at all) would keep it drawing for ages
MAX_DRAWS = 4e8


def _check_draw(rng, n, least=0):
    """``n`` as an int, refusing what no generator can draw from: ``rng`` must be a NumPy
    Generator (seeded streams are reproducible only through one), ``n`` an integer >=
    ``least`` (0: an empty batch)."""
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"rng must be a numpy.random.Generator, e.g. "
                         f"np.random.default_rng(seed), got {type(rng).__name__}", param="rng")
    return check_int_at_least("n", n, least, param="n")


def _perm_rows(rng, n, n_types):
    """``n`` independent random permutations of ``0..n_types-1``, shape (n, n_types)."""
    n, n_types = _check_draw(rng, n), check_int_at_least("n_types", n_types, 1, param="n_types")
    return np.argsort(rng.random((n, n_types)), axis=1)


def permutation_copy(rng, n, n_types=LENGTH):
    r"""Sec. 3.3: every input is a permutation of the same ``n_types`` words; copy it.

    Under this distribution the count table C (Snell Eq. (16)) is constant:
    every pair holds every word once, so KTIW cannot be learned from it.
    """
    src = _perm_rows(rng, n, n_types) + 1                      # (n, L) words 1..L
    return src, src.copy()


def copy_control(rng, n, n_types=LENGTH, n_vocab=N_CONTROL_VOCAB):
    r"""Sec. 3.3 control: ``n_types`` distinct words drawn from ``n_vocab``, permuted; copy it."""
    n_types = check_int_at_least("n_types", n_types, 1, param="n_types")
    if check_int_at_least("n_vocab", n_vocab, 1, param="n_vocab") < n_types:
        raise InputError(f"n_vocab must be >= n_types ({n_types}), got {n_vocab}",
                         param="n_vocab")
    src = _perm_rows(rng, n, n_vocab)[:, :n_types] + 1          # first L of a permutation
    return src, src.copy()


def permutation_mixture(rng, n, n_types=LENGTH):
    r"""App. A.3: a permutation of {1..L} or of {L+1..2L} (each with probability 1/2); copy it."""
    src = _perm_rows(rng, n, n_types) + 1
    src += n_types * rng.integers(0, 2, size=(n, 1))
    return src, src.copy()


def fixed_permutation(seed, length=LENGTH):
    r"""The fixed random permutation :math:`\pi` of positions in Snell Eq. (25)."""
    return np.random.default_rng([25, int(seed)]).permutation(length)


def permutation_function(rng, n, pi, n_vocab=N_CONTROL_VOCAB):
    r"""Snell Eq. (25), Sec. 6.2: :math:`f(x) = [x_{\pi(1)}, \dots, x_{\pi(L)}]`.

    The inputs are the control's.

    With ``pi = arange(L)`` this is plain copying on the same inputs.
    """
    pi = np.asarray(pi)
    if pi.ndim != 1 or pi.dtype.kind not in "iu" or not np.array_equal(np.sort(pi),
                                                                       np.arange(pi.size)):
        raise InputError(f"pi must be a permutation of the positions 0..L-1 (e.g. "
                         f"fixed_permutation(seed)), got {pi.tolist()!r}", param="pi")
    src, _ = copy_control(rng, n, len(pi), n_vocab)
    return src, src[:, pi]


def keyword_classification(rng, n, length=LENGTH, n_vocab=LENGTH, keyword=KEYWORD):
    r"""Sec. 6.1: length-``length`` sequences over {1..n_vocab}; positive iff ``keyword`` occurs.

    Positives hold the keyword exactly once; sequences with it twice or more are
    rejected, and so are draws of a class that is already full: the first
    ``n // 2`` labels are 1 and the rest 0 before a shared shuffle, so the
    classes are balanced exactly (``n`` odd: one more negative).

    Returns
    -------
    x : (n, length) int64, y : (n,) int64 in {0, 1}, l_star : (n,) int64 (-1 in negatives)
    """
    n, length, n_vocab = _check_keyword_task(rng, n, length, n_vocab, keyword)
    n_pos = n // 2
    want = {1: n_pos, 0: n - n_pos}
    got = {1: [], 0: []}
    while any(sum(map(len, got[c])) < want[c] for c in (0, 1)):
        cand = rng.integers(1, n_vocab + 1, size=(max(2 * n, 16), length))
        hits = (cand == keyword).sum(axis=1)
        for label in (0, 1):
            rows = cand[hits == label]                              # rejection: 0 or 1 hit
            got[label].append(rows[: want[label] - sum(map(len, got[label]))])
    x = np.concatenate(got[1] + got[0])                             # (n, length)
    y = np.r_[np.ones(n_pos, np.int64), np.zeros(n - n_pos, np.int64)]
    order = rng.permutation(n)
    x, y = x[order], y[order]
    l_star = np.where(y == 1, np.argmax(x == keyword, axis=1), -1)
    return x.astype(np.int64), y, l_star


def _check_keyword_task(rng, n, length, n_vocab, keyword):
    """``(n, length, n_vocab)`` as ints, refusing settings the rejection sampler cannot
    finish: a keyword outside 1..n_vocab or a one-word vocabulary (never or always the
    keyword), or a length where a draw holds the keyword exactly once, or not at all, so
    rarely that filling the n // 2 positives and the other negatives would draw more than
    MAX_DRAWS words on average.

    The sampler stays as it is (not a direct draw of the keyword's position, which gives
    the same distribution but other numbers): the seeded streams of batch_stream, and the
    results recorded from them, depend on its draws.
    """
    n = _check_draw(rng, n, least=1)
    length = check_int_at_least("length", length, 1, param="length")
    n_vocab = check_int_at_least("n_vocab", n_vocab, 2, param="n_vocab")
    if not (isinstance(keyword, numbers.Integral) and 1 <= keyword <= n_vocab):
        raise InputError(f"keyword must be a word of the vocabulary 1..{n_vocab} (n_vocab), "
                         f"got {keyword!r}", param="keyword")
    log_miss = length * math.log1p(-1.0 / n_vocab)               # log P(no keyword)
    log_once = math.log(length / (n_vocab - 1)) + log_miss        # log P(exactly once)
    # rows drawn until each class is full, about want / P(class), each of `length` words
    log_draws = math.log(length) + max(math.log(max(n // 2, 1)) - log_once,
                                       math.log(n - n // 2) - log_miss)
    if log_draws > math.log(MAX_DRAWS):
        raise InputError(f"with length {length} and n_vocab {n_vocab} a sequence holds the "
                         f"keyword exactly once with probability {math.exp(log_once):.2g} "
                         f"and never with {math.exp(log_miss):.2g}: sampling {n} of them "
                         f"would draw about {math.exp(log_draws):.2g} words; keep n_vocab "
                         "near length (about one keyword per sequence)",
                         param=("length", "n_vocab"))
    return n, length, n_vocab


#: task name -> (generator, vocabulary size V without the start id); conditions
#: name the distributions that Figures 3, 6 and Section 6.2 compare.
SEQ_TASKS = {
    "permutation": lambda rng, n, pi: permutation_copy(rng, n),
    "control": lambda rng, n, pi: copy_control(rng, n),
    "mixture": lambda rng, n, pi: permutation_mixture(rng, n),
    "permutation-function": lambda rng, n, pi: permutation_function(rng, n, pi),
    "copy": lambda rng, n, pi: permutation_function(rng, n, np.arange(LENGTH)),
}
SEQ_VOCAB = {"permutation": LENGTH, "control": N_CONTROL_VOCAB, "mixture": 2 * LENGTH,
             "permutation-function": N_CONTROL_VOCAB, "copy": N_CONTROL_VOCAB}
CONDITION_CODES = {name: i for i, name in enumerate(
    ["permutation", "control", "mixture", "permutation-function", "copy", "keyword"])}


def batch_stream(condition, seed, step, n, pi_seed=0):
    """Batch ``step`` of ``condition`` for ``seed`` (``step = -1``: the fixed test set).

    Returns ``(src, tgt)`` for seq2seq conditions and ``(x, y, l_star)`` for ``"keyword"``.
    """
    if condition not in CONDITION_CODES:
        raise InputError(f"unknown condition {condition!r}: use one of "
                         f"{', '.join(CONDITION_CODES)}", param="condition")
    rng = np.random.default_rng([CONDITION_CODES[condition], int(seed), int(step) + 1])
    if condition == "keyword":
        return keyword_classification(rng, n)
    return SEQ_TASKS[condition](rng, n, fixed_permutation(pi_seed))


def count_tables(src, tgt, n_vocab):
    r"""Count table C (Snell Eq. (16)) and :math:`\beta^{IBM}` (Eqs. (17)-(18)) of a sample.

    Returns ``C`` of shape (V+1, V+1) (row/column 0, the start id, stays zero)
    and ``beta`` of shape (n, T, L): for every pair, Trans(y_t | x_l).
    Under a permutation distribution ``beta`` is the same at every position.
    """
    src_list, tgt_list = list(np.asarray(src)), list(np.asarray(tgt))
    C = count_table(src_list, tgt_list, n_vocab + 1, n_vocab + 1)
    trans = trans_from_counts(C)
    beta = np.stack([beta_ibm(trans, x, y) for x, y in zip(src_list, tgt_list)])
    return C, beta
