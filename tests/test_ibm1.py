"""IBM Model 1: Eq. (16) count table, Eqs. (17)-(19), and EM (Brown et al., 1993)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from minimal_attn import ibm1
from minimal_attn._xp import cupy_available, to_numpy
from minimal_attn.errors import InputError

_CUPY, _NO_CUPY = cupy_available()
XPS = ["numpy", pytest.param("cupy", marks=pytest.mark.skipif(not _CUPY, reason=_NO_CUPY))]


# ------------------------------------------------------------- references
def count_table_loops(src, tgt, n_src, n_tgt):
    """Eq. (16) written as its triple sum, one Python loop per symbol."""
    C = np.zeros((n_src, n_tgt))
    for x, y in zip(src, tgt):
        for o in y:
            for i in x:
                C[i, o] += 1.0 / len(x)
    return C


def em_loops(src, tgt, n_src, n_tgt, iterations, null):
    """Brown et al.'s EM as textbook loops over every target and source occurrence."""
    rows = n_src + int(null)
    t = np.full((rows, n_tgt), 1.0 / n_tgt)
    lls = []
    for k in range(iterations + 1):
        counts, ll = np.zeros((rows, n_tgt)), 0.0
        for x, y in zip(src, tgt):
            xs = ([n_src] if null else []) + [int(i) for i in x]
            for o in y:
                z = sum(t[i, o] for i in xs)
                ll += math.log(z / len(xs))
                for i in xs:
                    counts[i, o] += t[i, o] / z
        lls.append(ll)
        if k == iterations:
            break
        total = counts.sum(axis=1, keepdims=True)
        t = np.where(total > 0, counts / np.where(total > 0, total, 1), t)
    return t, lls


@st.composite
def corpus(draw, max_pairs=8, max_len=6, max_vocab=5):
    """Shapes first (pairs, lengths, vocabularies), then ids; repeats are frequent."""
    n_src = draw(st.integers(1, max_vocab))
    n_tgt = draw(st.integers(1, max_vocab))
    P = draw(st.integers(1, max_pairs))
    src = [np.array(draw(st.lists(st.integers(0, n_src - 1), min_size=1, max_size=max_len)))
           for _ in range(P)]
    tgt = [np.array(draw(st.lists(st.integers(0, n_tgt - 1), min_size=0, max_size=max_len)),
                    dtype=np.int64) for _ in range(P)]
    return src, tgt, n_src, n_tgt


# ---------------------------------------------------------------- Eq. (16)
def test_count_table_two_sentences_by_hand():
    # pair 1: (a b -> x), pair 2: (a -> x y); a=0, b=1, x=0, y=1
    src, tgt = [np.array([0, 1]), np.array([0])], [np.array([0]), np.array([0, 1])]
    C = ibm1.count_table(src, tgt, 2, 2)
    np.testing.assert_allclose(C, [[1.5, 1.0], [0.5, 0.0]])


def test_count_table_counts_every_occurrence():
    # a twice in x adds 2/L; x twice in y adds two tokens' worth
    C = ibm1.count_table([np.array([0, 0, 1])], [np.array([0, 0])], 2, 1)
    np.testing.assert_allclose(C, [[4 / 3], [2 / 3]])


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_first_e_step_from_uniform_is_eq16(data):
    src, tgt, n_src, n_tgt = data.draw(corpus())
    C = ibm1.count_table(src, tgt, n_src, n_tgt)
    np.testing.assert_allclose(C, count_table_loops(src, tgt, n_src, n_tgt), atol=1e-12)
    links = ibm1.build_links(src, tgt, n_src, n_tgt, null=False)
    counts, _ = ibm1.e_step(links, np.full(links.n_cells, 0.37))      # any uniform table
    dense = np.zeros((n_src, n_tgt))
    dense[links.cell_src, links.cell_tgt] = counts
    np.testing.assert_allclose(dense, C, atol=1e-12)


# --------------------------------------------------------- Eqs. (17)-(19)
def test_trans_is_one_em_iteration_without_null():
    src, tgt = [np.array([0, 1]), np.array([0])], [np.array([0]), np.array([0, 1])]
    trans = ibm1.trans_from_counts(ibm1.count_table(src, tgt, 3, 2))
    np.testing.assert_allclose(trans, [[0.6, 0.4], [1.0, 0.0], [0.0, 0.0]])  # word 2 unseen
    model = ibm1.train_ibm1(src, tgt, 3, 2, iterations=1, null=False)
    np.testing.assert_allclose(model.to_dense(), trans, atol=1e-15)


def test_beta_and_alpha_ibm():
    trans = np.array([[0.6, 0.4], [1.0, 0.0]])
    x, y = np.array([0, 1, 0]), np.array([1, 0])
    beta = ibm1.beta_ibm(trans, x, y)                                   # (T, L)
    np.testing.assert_allclose(beta, [[0.4, 0.0, 0.4], [0.6, 1.0, 0.6]])
    alpha = ibm1.alpha_ibm(beta)
    np.testing.assert_allclose(alpha, [[0.5, 0.0, 0.5], [0.6 / 2.2, 1 / 2.2, 0.6 / 2.2]])
    np.testing.assert_allclose(ibm1.alpha_ibm(np.zeros((1, 4))), [[0.25] * 4])


def test_beta_from_sparse_model_equals_dense():
    rng = np.random.default_rng(3)
    src = [rng.integers(0, 6, rng.integers(1, 6)) for _ in range(20)]
    tgt = [rng.integers(0, 5, rng.integers(1, 6)) for _ in range(20)]
    model = ibm1.train_ibm1(src, tgt, 7, 5, iterations=3, null=True)
    dense = model.to_dense()
    for x, y in zip(src, tgt):
        np.testing.assert_array_equal(ibm1.beta_ibm(model, x, y), ibm1.beta_ibm(dense, x, y))
    assert ibm1.beta_ibm(model, np.array([6]), np.array([0]))[0, 0] == 0.0   # never seen


def test_words_that_never_meet_a_target_word():
    # word 1 only in a pair with an empty target, word 2 nowhere; word 0 never meets
    # target 1. The sparse table is 0 off the co-occurring pairs (as Trans, Eq. (17)); the
    # literal EM leaves a row it never updates at the uniform start
    src = [np.array([0, 0]), np.array([1]), np.array([0])]
    tgt = [np.array([0]), np.array([], dtype=np.int64), np.array([0, 0])]
    model = ibm1.train_ibm1(src, tgt, 3, 2, iterations=3, null=False)
    table, _ = ibm1.train_ibm1_dense(src, tgt, 3, 2, iterations=3, null=False)
    trans = ibm1.trans_from_counts(ibm1.count_table(src, tgt, 3, 2))
    np.testing.assert_array_equal(model.to_dense(), [[1, 0], [0, 0], [0, 0]])
    np.testing.assert_array_equal(model.to_dense(), trans)
    np.testing.assert_array_equal(table, [[1, 0], [0.5, 0.5], [0.5, 0.5]])
    i, o = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(model.lookup(i, o), model.to_dense())


# ---------------------------------------------------------------------- EM
def test_em_two_sentences_by_hand():
    src, tgt = [np.array([0, 1]), np.array([0])], [np.array([0]), np.array([0, 1])]
    model = ibm1.train_ibm1(src, tgt, 2, 2, iterations=2, null=False)
    # iteration 2: posteriors in pair 1 are 0.6/1.6 and 1/1.6 -> t(x|a) = 1.375/2.375
    np.testing.assert_allclose(model.to_dense(), [[11 / 19, 8 / 19], [1.0, 0.0]], atol=1e-15)
    np.testing.assert_allclose(model.log_likelihood,
                               [3 * math.log(0.5), math.log(0.8 * 0.6 * 0.4),
                                math.log(0.5 * (1 + 11 / 19) * (11 / 19) * (8 / 19))])


def test_em_with_null_first_iteration_by_hand():
    src, tgt = [np.array([0, 1]), np.array([0])], [np.array([0]), np.array([0, 1])]
    model = ibm1.train_ibm1(src, tgt, 2, 2, iterations=1, null=True)
    assert model.null_id == 2
    # NULL and a both collect 1/3 + 1/2 of x and 1/2 of y; b collects 1/3 of x
    np.testing.assert_allclose(model.to_dense(), [[5 / 8, 3 / 8], [1.0, 0.0], [5 / 8, 3 / 8]])


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_em_matches_textbook_loops_with_repeats(data):
    src, tgt, n_src, n_tgt = data.draw(corpus())
    null = data.draw(st.booleans())
    k = data.draw(st.integers(0, 4))
    model = ibm1.train_ibm1(src, tgt, n_src, n_tgt, iterations=k, null=null)
    t_ref, ll_ref = em_loops(src, tgt, n_src, n_tgt, k, null)
    dense = model.to_dense()
    s, o, _ = model.entries()
    np.testing.assert_allclose(dense[s, o], t_ref[s, o], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(model.log_likelihood, ll_ref, rtol=1e-10, atol=1e-10)


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_sparse_em_equals_the_literal_dense_em(data):
    src, tgt, n_src, n_tgt = data.draw(corpus())
    null = data.draw(st.booleans())
    k = data.draw(st.integers(0, 4))
    model = ibm1.train_ibm1(src, tgt, n_src, n_tgt, iterations=k, null=null)
    table, history = ibm1.train_ibm1_dense(src, tgt, n_src, n_tgt, iterations=k, null=null)
    s, o, p = model.entries()
    np.testing.assert_allclose(p, table[s, o], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(model.log_likelihood, history, rtol=1e-12, atol=1e-12)
    # a row that co-occurs with anything sums to one over its cells in both
    for i in np.unique(s):
        assert table[i].sum() == pytest.approx(1.0)


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_log_likelihood_never_decreases_and_rows_sum_to_one(data):
    src, tgt, n_src, n_tgt = data.draw(corpus(max_pairs=10, max_vocab=7))
    null = data.draw(st.booleans())
    model = ibm1.train_ibm1(src, tgt, n_src, n_tgt, iterations=6, null=null)
    ll = np.array(model.log_likelihood)
    assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[:-1]).max())
    rows = np.unique(model.cell_src)          # every source word that co-occurs with a target
    np.testing.assert_allclose(model.to_dense()[rows].sum(axis=1), 1.0, atol=1e-12)


def test_repeated_target_word_counts_per_occurrence():
    # y = (x x) must equal the corpus where y = (x) appears twice, not once
    doubled = ibm1.train_ibm1([np.array([0, 1])] * 2, [np.array([0, 0]), np.array([1])],
                              2, 2, iterations=3, null=True)
    split = ibm1.train_ibm1([np.array([0, 1])] * 3, [np.array([0]), np.array([0]),
                                                     np.array([1])], 2, 2, iterations=3,
                            null=True)
    np.testing.assert_allclose(doubled.to_dense(), split.to_dense(), atol=1e-15)


def test_agrees_with_nltk_when_no_target_word_repeats():
    nltk_ibm = pytest.importorskip("nltk.translate")
    pairs = [("klein ist das haus", "the house is small"), ("das haus ist ja groß",
             "the house is big"), ("das buch ist ja klein", "the book is small"),
             ("das haus", "the house"), ("das buch", "the book"), ("ein buch", "a book")]
    tgt_w = [p[0].split() for p in pairs]
    src_w = [p[1].split() for p in pairs]
    sv = sorted({w for s in src_w for w in s})
    tv = sorted({w for s in tgt_w for w in s})

    def enc(sents, vocab):
        return [np.array([vocab.index(w) for w in s]) for s in sents]

    model = ibm1.train_ibm1(enc(src_w, sv), enc(tgt_w, tv), len(sv), len(tv), iterations=5)
    ref = nltk_ibm.IBMModel1([nltk_ibm.AlignedSent(t, s) for t, s in zip(tgt_w, src_w)], 5)
    for i, o, p in zip(*model.entries()):
        s = None if i == model.null_id else sv[i]
        assert p == pytest.approx(ref.translation_table[tv[o]][s], abs=1e-12)


# ------------------------------------------------------- layout and errors
def test_sort_fallback_path_gives_same_table():
    # a huge |O| overflows the packed sort key, forcing the argsort path
    src = [np.array([0, 1, 1]), np.array([2, 0])]
    tgt = [np.array([0, 2]), np.array([1, 1, 0])]
    small = ibm1.train_ibm1(src, tgt, 3, 3, iterations=3)
    huge = ibm1.train_ibm1(src, tgt, 3, 2**58, iterations=3)
    assert huge.n_tgt == 2**58
    np.testing.assert_array_equal(small.entries()[0], huge.entries()[0])
    np.testing.assert_allclose(small.entries()[2], huge.entries()[2], rtol=1e-12)


@pytest.mark.parametrize("dense", [False, True])
def test_probe_refuses_ids_outside_the_table(dense):
    # the sparse table's flat key src * |O| + tgt would read cell (1, 0) for (0, 2)
    m = ibm1.train_ibm1([np.array([0]), np.array([1])], [np.array([1]), np.array([0])],
                        2, 2, iterations=1, null=False)
    table = m.to_dense() if dense else m
    for x, y in [([0], [2]), ([-1], [0]), ([2], [0]), ([0], [-1])]:
        with pytest.raises(InputError, match="ids must lie in"):
            ibm1.beta_ibm(table, np.array(x), np.array(y))
    np.testing.assert_array_equal(ibm1.beta_ibm(table, np.array([0, 1]), np.array([1, 0])),
                                  [[1.0, 0.0], [0.0, 1.0]])


def test_build_links_rejects_bad_input():
    with pytest.raises(InputError, match="ids must lie"):
        ibm1.build_links([np.array([0, 5])], [np.array([0])], 3, 2)
    with pytest.raises(InputError, match="source sentences"):
        ibm1.build_links([np.array([0])], [], 3, 2)
    with pytest.raises(InputError, match="empty source"):
        ibm1.build_links([np.array([], dtype=int)], [np.array([0])], 3, 2, null=False)
    with pytest.raises(InputError, match="empty source"):          # the literal EM too
        ibm1.train_ibm1_dense([np.array([], dtype=int)], [np.array([0])], 3, 2, null=False)
    # with NULL an empty source is fine: every target word comes from NULL
    m = ibm1.train_ibm1([np.array([], dtype=int)], [np.array([0])], 3, 2, iterations=1)
    assert m.to_dense()[m.null_id, 0] == 1.0


@pytest.mark.parametrize("xp_name", XPS)
def test_array_namespace(xp_name):
    xp = pytest.importorskip(xp_name)
    rng = np.random.default_rng(0)
    src = [rng.integers(0, 6, rng.integers(1, 6)) for _ in range(15)]
    tgt = [rng.integers(0, 4, rng.integers(1, 6)) for _ in range(15)]
    ref = ibm1.train_ibm1(src, tgt, 6, 4, iterations=3)
    got = ibm1.train_ibm1(src, tgt, 6, 4, iterations=3, xp=xp)
    np.testing.assert_allclose(to_numpy(got.to_dense()), ref.to_dense(), atol=1e-12)
    np.testing.assert_allclose(got.log_likelihood, ref.log_likelihood, rtol=1e-12)
