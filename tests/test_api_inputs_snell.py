"""Input checks of the library API (audit /tmp/audits/api: H1, H2, M9, L17-L20, L22, L25).

Each refusal is an InputError, raised before any work, with a one-line message naming the
problem; the valid inputs next to each give the numbers they gave before the checks (values
recorded from the code before this change).
"""

import os
import re
import signal
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest

import minimal_attn
from minimal_attn import agreement as ag
from minimal_attn import ibm1, proxy
from minimal_attn import synthetic_tasks as st
from minimal_attn.backends.vr.table1 import run_experiment
from minimal_attn.backends.vr.table1_driver import run_table1
from minimal_attn.errors import DivergedError, InputError
from minimal_attn.experiments.config import ExperimentConfig, check_config
from minimal_attn.experiments.text import ProxyExperiment, run_ibm1, run_proxy


@contextmanager
def no_hang(seconds=10):
    """Fail instead of looping forever (the old keyword sampler never returned)."""
    def stop(signum, frame):
        raise AssertionError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def refused(phrase, fn, *args, **kwargs):
    with no_hang(), pytest.raises(InputError, match=re.escape(phrase)) as err:
        fn(*args, **kwargs)
    assert "\n" not in str(err.value)                      # one line
    return err.value


# ------------------------------------------------------------------ H1, L18: Table 1 settings
def tiny(**kw):
    return ExperimentConfig(**{**dict(backend="numpy", dataset="linear-orthogonal", epochs=1,
                                      n_train=20, n_test=10, m=3), **kw})


@pytest.mark.parametrize("paradigms, phrase", [
    (["bogus"], "unknown paradigm 'bogus'"),
    ([], "paradigms is empty"),
    (["sa", "SA"], "names sa twice"),
    (["sa", "soft"], "names sa twice"),
    ("sa,bogus", "unknown paradigm 'bogus'"),
    (5, "unknown paradigm 5"),
])
def test_run_experiment_refuses_bad_paradigms_before_writing(tmp_path, paradigms, phrase):
    out = tmp_path / "run"
    refused(phrase, run_experiment, tiny(paradigms=paradigms), out=str(out))
    assert not out.exists()


@pytest.mark.parametrize("paradigms, keys", [(["SA"], ["sa"]), (["soft", " lv"], ["sa", "lv"]),
                                             ("sa", ["sa"]), ("lv,SA", ["lv", "sa"])])
def test_run_experiment_keys_results_by_the_canonical_names(tmp_path, paradigms, keys):
    # before: every run trained, then KeyError: 'SA' (or a string read letter by letter)
    results, meta = run_experiment(tiny(paradigms=paradigms), out=str(tmp_path / "run"))
    assert list(results) == keys and meta["paradigms"] == keys and list(meta["lr"]) == keys
    assert os.path.exists(tmp_path / "run" / "results.json")


def test_check_config_returns_the_canonical_config():
    c = check_config(tiny(paradigms="all", m=3.0))
    assert c.paradigms == ["sa", "ha", "lv", "hybrid"] and type(c.m) is int


def test_the_driver_refuses_an_adapter_without_paradigms(tmp_path):
    class Empty:                           # any data set: the names are checked for all
        paradigms, seeds, focus, title = (), range(1), "a_z", None

        def check(self):
            pass

        def load(self, log):
            raise AssertionError("loaded data for no paradigm")

    refused("paradigms is empty", run_table1, Empty(), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("change, phrase", [
    (dict(epochs=float("nan")), "epochs must be an integer >= 1, got nan"),
    (dict(lr={"sa": "0.1"}), "lr must be a finite number > 0, got '0.1'"),
    (dict(lr=0.1), "lr must be a dict of rates"),
    (dict(momentum="x"), "momentum must be a number in [0, 1)"),
    (dict(switch_epoch=float("nan")), "switch_epoch must be auto or an integer in 0..1"),
    (dict(threshold=None), "threshold must be a number in (0, 1)"),
    (dict(chunk=0.5), "chunk must be an integer >= 1"),
])
def test_experiment_config_type_errors_are_input_errors(tmp_path, change, phrase):
    refused(phrase, run_experiment, tiny(**change), out=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_settings_passed_as_a_dict_are_refused(tmp_path):
    refused("must be an ExperimentConfig", run_experiment, {"backend": "numpy"})
    refused("cfg must be of type Ibm1Config", run_ibm1, "a", "b", {"iterations": 2})
    refused("cfg must be of type ProxyExperiment", run_proxy, "a", "b", {"holdout": 0.2})
    refused("config must be a ProxyConfig", proxy.train_proxy, [np.array([0])],
            [np.array([0])], 1, 2, {"d": 4})


# ------------------------------------------------------------------ L17: run_proxy(val=...)
def test_run_proxy_refuses_a_single_validation_path(tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("x y\nz y\n" * 10, encoding="utf-8")
    refused("val must be a pair (val_src, val_tgt)", run_proxy, str(tmp_path / "a.txt"),
            str(tmp_path / "b.txt"), ProxyExperiment(min_count=1), val=str(tmp_path / "a.txt"))


# ------------------------------------------------------------------ H2, L20: synthetic tasks
def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("kw, phrase", [
    (dict(keyword=0), "keyword must be a word of the vocabulary 1..40"),
    (dict(keyword=41), "keyword must be a word of the vocabulary 1..40"),
    (dict(n_vocab=1), "n_vocab must be an integer >= 2"),
    (dict(length=0), "length must be an integer >= 1"),
    (dict(length=1000), "would draw about"),
    (dict(n=-2), "n must be an integer >= 1"),
])
def test_keyword_task_refuses_what_it_cannot_sample(kw, phrase):
    refused(phrase, st.keyword_classification, rng(), **{"n": 10, **kw})


def test_generators_refuse_bad_rng_task_and_pi():
    refused("rng must be a numpy.random.Generator", st.permutation_copy, 0, 2)
    refused("rng must be a numpy.random.Generator", st.keyword_classification, 0, 2)
    refused("unknown condition 'Permutation': use one of permutation, control",
            st.batch_stream, "Permutation", 0, 0, 4)
    refused("pi must be a permutation", st.permutation_function, rng(), 2, np.array([0, 50]))
    refused("pi must be a permutation", st.permutation_function, rng(), 2, [0, 0, 1])


def test_keyword_draws_are_unchanged():
    """The rejection sampler stays: seeded streams (and results recorded from them) hold."""
    x, y, l_star = st.keyword_classification(rng(1), 7, length=10, n_vocab=12, keyword=3)
    assert x.tolist() == [[1, 10, 1, 4, 6, 6, 2, 12, 9, 12], [6, 8, 10, 11, 3, 8, 10, 4, 5, 11],
                          [11, 10, 11, 7, 10, 4, 6, 10, 2, 4], [2, 6, 12, 2, 5, 5, 11, 3, 7, 4],
                          [6, 7, 10, 12, 1, 2, 10, 12, 3, 4], [11, 6, 4, 10, 4, 5, 8, 7, 2, 1],
                          [2, 9, 4, 7, 12, 4, 9, 2, 4, 12]]
    assert y.tolist() == [0, 1, 0, 1, 1, 0, 0] and l_star.tolist() == [-1, 4, -1, 7, 8, -1, -1]
    x, y, l_star = st.batch_stream("keyword", 2, 5, 6)
    assert x.sum(axis=1).tolist() == [769, 876, 901, 898, 982, 848]
    assert y.tolist() == [0, 1, 0, 1, 0, 1] and l_star.tolist() == [-1, 19, -1, 5, -1, 24]


# ------------------------------------------------------------------ M9: IBM Model 1
SRC = [np.array([0, 1, 2]), np.array([2, 1])]
TGT = [np.array([0, 1]), np.array([1])]


@pytest.mark.parametrize("fn", [ibm1.count_table, ibm1.train_ibm1_dense, ibm1.train_ibm1])
@pytest.mark.parametrize("src, tgt, n_src, n_tgt, phrase", [
    (SRC, TGT[:1], 3, 2, "2 source sentences but 1 target sentences"),
    (SRC, TGT, 2, 2, "source ids must lie in [0, 2)"),
    ([np.array([-1, 1])], [np.array([0])], 3, 2, "source ids must lie in [0, 3)"),
    ([np.array([0.0, 1.5])], [np.array([0])], 3, 2, "source ids must be integers"),
    ([[0, 1.5]], [[0]], 3, 2, "source ids must be integers"),
    (SRC, [np.array([], int)] * 2, 3, 0, "n_tgt must be an integer >= 1"),
    (SRC, TGT, -1, 2, "n_src must be an integer >= 1"),
])
def test_ibm1_refuses_corpora_it_would_misread(fn, src, tgt, n_src, n_tgt, phrase):
    refused(phrase, fn, src, tgt, n_src, n_tgt)


def test_dense_em_refuses_negative_iterations():
    refused("iterations must be an integer >= 0", ibm1.train_ibm1_dense, SRC, TGT, 3, 2,
            iterations=-1)


def corpus():
    r = rng(0)
    src = [r.integers(0, 6, size=r.integers(1, 5)) for _ in range(30)]
    tgt = [r.integers(0, 5, size=r.integers(1, 5)) for _ in range(30)]
    return src, tgt


LOGLIK = [-123.92671925742573, -114.78573158380496, -112.54545476948817, -111.36536458890062]


def test_ibm1_numbers_are_unchanged():
    src, tgt = corpus()
    np.testing.assert_allclose(ibm1.train_ibm1_dense(src, tgt, 6, 5, iterations=3)[1], LOGLIK,
                               rtol=1e-13)
    for s, t in ((src, tgt), ([a.tolist() for a in src], [a.tolist() for a in tgt])):
        np.testing.assert_allclose(ibm1.train_ibm1(s, t, 6, 5, iterations=3).log_likelihood,
                                   LOGLIK, rtol=1e-13)
    C = ibm1.count_table(src, tgt, 6, 5)
    np.testing.assert_allclose(C.sum(axis=1), [20.333333333333332, 9.75, 9.083333333333332,
                                               11.166666666666666, 17.666666666666664, 9.0],
                               rtol=1e-13)
    # an empty sentence of floats beside integer ones is still an empty sentence
    ok = ibm1.train_ibm1([np.array([0, 1]), np.array([])], [np.array([1]), np.array([], int)],
                         3, 2, iterations=1)
    assert len(ok.log_likelihood) == 2


# ------------------------------------------------------------------ L19: agreement
def test_agreement_refuses_shapes_it_would_misread():
    refused("u and v must be vectors (L,) or matrices (T, L)", ag.agreement_rows,
            np.zeros((2, 2, 3)), np.zeros((2, 2, 3)))
    refused("agreement_baseline takes one vector", ag.agreement_baseline, np.zeros((2, 3)))
    refused("kendall_tau takes two vectors of one length", ag.kendall_tau,
            np.zeros((2, 3)), np.zeros((2, 3)))
    refused("kendall_tau takes two vectors of one length", ag.kendall_tau, [1, 2, 3], [1, 2])
    refused("must be an integer >= 1, got -5", ag.top_k, -5)


def test_agreement_numbers_are_unchanged():
    assert [ag.top_k(L, p) for L in (1, 20, 21, 100) for p in (5, 50, 100)] == \
        [1, 1, 1, 1, 10, 20, 2, 11, 21, 5, 50, 100]
    v = np.array([0.3, 0.1, 0.9, 0.2])
    assert ag.agreement_baseline(v) == 0.25
    assert ag.kendall_tau([1.0, 2.0, 3.0], [1.0, 3.0, 2.0]) == pytest.approx(1 / 3)
    assert ag.agreement_rows(np.eye(3), np.eye(3)[::-1]).tolist() == [0, 1, 0]


# ------------------------------------------------------------------ L22: the proxy
def test_train_proxy_refuses_empty_sets_bad_sizes_and_divergence():
    cfg = proxy.ProxyConfig(d=4, epochs=1, batch_size=2)
    refused("src holds no pairs", proxy.train_proxy, [], [], 3, 2, cfg)
    refused("val holds no pairs", proxy.train_proxy, SRC, TGT, 3, 2, cfg, val=([], []))
    refused("n_src must be an integer >= 1, got -1", proxy.train_proxy, SRC, TGT, -1, 2, cfg)
    err = refused("diverged; lower the learning rate", proxy.train_proxy, SRC, TGT, 3, 2,
                  proxy.ProxyConfig(d=4, epochs=3, lr=1e12, optimizer="sgd"))
    assert isinstance(err, DivergedError)
    params = proxy.init_params(3, 2, 4, rng())
    refused("x and y must be id vectors (L,) and (T,)", proxy.beta_px, params,
            np.array([[0, 1]]), np.array([0]))


def test_proxy_numbers_are_unchanged():
    src, tgt = corpus()
    params, hist = proxy.train_proxy(src, tgt, 6, 5, proxy.ProxyConfig(d=4, epochs=3,
                                                                       batch_size=4),
                                     val=(src[:5], tgt[:5]))
    np.testing.assert_allclose([(r["train_loss"], r["val_loss"]) for r in hist],
                               [(1.6042062112526594, 1.5787881073066228),
                                (1.5811726553810024, 1.5515438040993021),
                                (1.5657839531862268, 1.5388085038336803)], rtol=1e-12)
    np.testing.assert_allclose(proxy.beta_px(params, src[0], tgt[0]),
                               [[0.1628482694637431, 0.1628482694637431, 0.3051989233708134,
                                 0.3051989233708134],
                                [0.20284659690864515, 0.20284659690864515,
                                 0.16950079911481816, 0.16950079911481816]], rtol=1e-12)
    _, hist = proxy.train_proxy(src, tgt, 6, 5, proxy.ProxyConfig(d=4, epochs=2, batch_size=8,
                                                                  optimizer="sgd", lr=0.1))
    np.testing.assert_allclose([r["train_loss"] for r in hist],
                               [1.6003129886746814, 1.5503806568531278], rtol=1e-12)


# ------------------------------------------------------------------ L25: the package docstring
def test_every_module_the_package_docstring_names_imports():
    import importlib

    names = re.findall(r":mod:`([\w.]+)`", minimal_attn.__doc__)
    assert "text_data" not in names and "minimal_attn.datasets.text" in names
    for name in names:
        importlib.import_module(name if name.startswith("minimal_attn")
                                else f"minimal_attn.{name}")


def test_synthetic_library_call_resolves_device_auto():
    """SyntheticConfig(device="auto") from Python: the device it picks, not torch.device("auto")
    (which raised a raw RuntimeError); cudagraph off CUDA is refused in one line."""
    pytest.importorskip("torch")
    import torch

    from minimal_attn.backends.snell.config import SyntheticConfig
    from minimal_attn.backends.snell.synthetic_experiments import run_synthetic

    small = SyntheticConfig(device="auto", steps=4, eval_every=2, n_test=8, hidden=8,
                            batch_size=4)
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="needs a CUDA device, got cpu"):
            run_synthetic("copy", replace(small, compile="cudagraph"), seeds=1)
    result = run_synthetic("copy", small, seeds=1)
    assert 0.0 <= result["converged_fraction"] <= 1.0


@pytest.mark.parametrize("kw", [dict(length=10, n_vocab=10000, n=1000),
                                dict(length=1, n_vocab=1000, n=1000),
                                dict(length=10, n_vocab=2, n=1000),
                                dict(length=400, n_vocab=40, n=8)])
def test_keyword_task_samples_rare_but_cheap_settings(kw):
    """The bound is on the expected work, not on a class's probability alone: each of these
    finished in well under a second before the checks came, and still must."""
    x, y, l_star = st.keyword_classification(rng(), **kw)
    n, length, vocab = kw["n"], kw["length"], kw["n_vocab"]
    hits = (x == st.KEYWORD).sum(axis=1)
    assert x.shape == (n, length) and x.min() >= 1 and x.max() <= vocab
    assert np.array_equal(hits, y) and y.sum() == n // 2          # once in positives only
    assert np.all(x[y == 1, l_star[y == 1]] == st.KEYWORD)


def test_copy_tasks_give_an_empty_batch_for_n_zero():
    src, tgt = st.permutation_copy(rng(), 0)
    assert src.shape == tgt.shape == (0, st.LENGTH)


@pytest.mark.parametrize("paradigms", [np.array(["sa", "LV"]), ("sa", "lv"), {"sa": 1, "lv": 2},
                                       (p for p in ["sa", "lv"])])
def test_config_takes_paradigms_of_any_iterable(paradigms):
    c = check_config(ExperimentConfig(backend="numpy", dataset="linear-orthogonal",
                                      paradigms=paradigms))
    assert c.paradigms == ["sa", "lv"]


def test_config_reads_rates_by_canonical_paradigm_and_numbers_as_floats():
    c = check_config(ExperimentConfig(backend="numpy", dataset="linear-orthogonal",
                                      lr={"SA": 0.5, "all": 0.1}, momentum=np.array(0.9),
                                      threshold=np.float32(0.75)))
    assert c.lr == {"sa": 0.5, "all": 0.1}
    assert type(c.momentum) is float and c.momentum == 0.9
    assert type(c.threshold) is float and c.threshold == 0.75
    refused("lr: unknown paradigm 'xx'", check_config,
            ExperimentConfig(backend="numpy", dataset="linear-orthogonal", lr={"xx": 0.1}))
