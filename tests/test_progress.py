"""The one progress protocol: what the library reports and what the click adapter draws."""

import io

import pytest

from minimal_attn.cli.options import ProgressBar
from minimal_attn.experiments.progress import counter


class Recorder:
    """A progress callback that keeps every call, per task label."""

    def __init__(self):
        self.calls = []

    def __call__(self, label, done, total, note=None):
        self.calls.append((label, done, total, note))

    def tasks(self):
        out = {}
        for label, done, total, note in self.calls:
            out.setdefault(label, []).append((done, total, note))
        return out

    def check_counts(self):
        """Within each task ``done`` never falls, stays within total and ends at total."""
        for label, calls in self.tasks().items():
            done = [d for d, _, _ in calls]
            assert done == sorted(done), label
            assert all(0 <= d <= t for d, t, _ in calls), label
            assert done[-1] == calls[-1][1], (label, done[-1], calls[-1][1])


def test_counter_counts_from_where_a_run_stands():
    rec = Recorder()
    tick = counter(rec, "train", 10, done=4)
    tick()
    tick(2, "loss 0.5")
    tick(0, "step 7 perf 0.9")
    assert rec.calls == [("train", 5, 10, None), ("train", 7, 10, "loss 0.5"),
                         ("train", 7, 10, "step 7 perf 0.9")]
    for off in (None, False):
        counter(off, "train", 10)(3, "ignored")          # no callback: nothing to call


def test_ode_reports_every_solve_and_simulated_step():
    from minimal_attn.experiments.ode import OdeConfig, run_ode, work_units

    cfg = OdeConfig(paradigms=("sa", "lv"), m=3, n_classes=2, t_max=0.5, lr=0.1,
                    simulate=True)
    rec = Recorder()
    run_ode(cfg, progress=rec)
    assert list(rec.tasks()) == ["solving and simulating"]
    rec.check_counts()
    # 2 paradigms x (1 solve + 5 steps of 0.1 up to t = 0.5)
    assert [d for _, d, _, _ in rec.calls] == list(range(1, 13)) and work_units(cfg) == 12


def test_fixed_focus_reports_every_recorded_epoch():
    from minimal_attn.experiments.fixed_focus import FixedFocusConfig, run_fixed_focus

    rec = Recorder()
    run_fixed_focus(FixedFocusConfig(m=3, n_classes=3, epochs=4, lr=0.1, alphas=["0.5"],
                                     paradigms=["sa", "ha"]), progress=rec)
    assert list(rec.tasks()) == ["training g"]
    rec.check_counts()
    assert rec.calls[-1][1:3] == (2 * 5, 2 * 5)


def test_ibm1_and_proxy_report_their_iterations_with_a_note(tmp_path):
    from minimal_attn.experiments.text import Ibm1Config, ProxyExperiment, run_ibm1, run_proxy
    from minimal_attn.proxy import ProxyConfig

    src, tgt = tmp_path / "a.src", tmp_path / "a.tgt"
    src.write_text("the house\nthe book\na house\nthe small book\n" * 5)
    tgt.write_text("das haus\ndas buch\nein haus\ndas kleine buch\n" * 5)
    rec = Recorder()
    run_ibm1(src, tgt, Ibm1Config(iterations=3), progress=rec)
    assert [(d, t) for _, d, t, _ in rec.calls] == [(1, 3), (2, 3), (3, 3)]
    assert all(label == "EM" and note.startswith("log-likelihood ")
               for label, _, _, note in rec.calls)
    rec = Recorder()
    run_proxy(src, tgt, ProxyExperiment(model=ProxyConfig(d=4, epochs=2, batch_size=4),
                                        min_count=1), progress=rec)
    assert [(label, d, t) for label, d, t, _ in rec.calls] == [("proxy", 1, 2), ("proxy", 2, 2)]
    assert all(note.startswith("val loss ") for *_, note in rec.calls)


def test_table1_reports_every_step_of_every_epoch():
    from minimal_attn.backends.vr.table1 import ExperimentConfig, run_experiment

    rec = Recorder()
    run_experiment(ExperimentConfig(backend="numpy", dataset="synthetic", m=3, epochs=2,
                                    n_train=40, n_test=20, batch_size=20, paradigms=["sa"]),
                   progress=rec)
    assert list(rec.tasks()) == ["sa seed 0 epoch 1/2", "sa seed 0 epoch 2/2"]
    rec.check_counts()
    assert all(t == 2 for _, _, t, _ in rec.calls)          # 40 mosaics in batches of 20
    assert any(note and note.startswith("loss ") for *_, note in rec.calls)


def test_synthetic_reports_its_phase(torch_one_thread):
    from minimal_attn.backends.snell.synthetic_experiments import run_synthetic
    from minimal_attn.backends.snell.synthetic_train import sized_config

    config, seeds = sized_config(seeds=1, steps=3, hidden=4, batch_size=2, eval_every=1,
                                 n_test=2)
    rec = Recorder()
    run_synthetic("copy-control", config, seeds=seeds, progress=rec)
    assert list(rec.tasks()) == ["training"]
    rec.check_counts()
    assert rec.calls[-1][1:3] == (3, 3)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_click_adapter_draws_one_bar_per_task_on_a_terminal(monkeypatch):
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    with ProgressBar() as bar:
        bar("first", 1, 2, "loss 0.25")
        bar("first", 2, 2)                 # done: the bar closes
        bar("first", 2, 2, "late note")    # a finished task's note draws nothing
        bar("second", 1, 3, "perf 0.5")
    text = err.getvalue()
    assert "first" in text and "loss 0.25" in text and "1/2" in text and "2/2" in text
    assert "late note" not in text
    assert "second" in text and "perf 0.5" in text and "1/3" in text
    assert bar.bar is None                 # the last bar was closed on leaving


@pytest.mark.parametrize("enabled,tty", [(False, True), (True, False)])
def test_the_click_adapter_is_silent_when_off_or_not_on_a_terminal(monkeypatch, enabled, tty):
    err = Terminal() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with ProgressBar(enabled) as bar:
        bar("task", 1, 2, "loss 1.0")
        bar("task", 2, 2)
    assert err.getvalue() == ""


def test_synthetic_presets_come_from_the_config():
    from minimal_attn.backends.snell.synthetic_train import (
        SYNTHETIC_SIZES,
        SyntheticConfig,
        sized_config,
    )
    from minimal_attn.errors import InputError

    cpu, seeds = sized_config()
    assert cpu == SyntheticConfig(eval_every=SyntheticConfig().steps // 20)
    assert seeds == SYNTHETIC_SIZES["cpu"]["seeds"]
    # the documented CPU size (docs/synthetic.md): 1000 steps, H = E = 32, batch 32, lr 3e-3
    assert (cpu.steps, cpu.hidden, cpu.embed, cpu.batch_size, cpu.lr) == (1000, 32, None, 32,
                                                                          3e-3)
    paper, seeds = sized_config("paper", steps=10)
    assert (paper.steps, paper.hidden, paper.embed, paper.eval_every, seeds) == (10, 256, 256,
                                                                                 1, 20)
    with pytest.raises(InputError, match="unknown size"):
        sized_config("huge")
