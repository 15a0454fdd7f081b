"""run_experiment: the library API behind `attn-dyn train` (numpy backend, no torch needed)."""

import json

import pytest

from minimal_attn.backends.vr.table1 import ExperimentConfig, run_config, run_experiment
from minimal_attn.errors import InputError
from minimal_attn.experiments.train_report import PAPER_TABLE1, summary_markdown

SMALL = dict(backend="numpy", dataset="synthetic", m=3, epochs=2, n_train=40, n_test=20,
             batch_size=20)


def test_learning_rates_per_paradigm_and_for_the_hybrid():
    c = ExperimentConfig(lr={"sa": 0.05, "ha": 0.01})
    assert (run_config(c, "sa", 0).lr, run_config(c, "ha", 0).lr) == (0.05, 0.01)
    assert run_config(c, "lv", 0).lr is None                        # the paper's
    hybrid = run_config(c, "hybrid", 0)
    assert (hybrid.lr, hybrid.hybrid_lr) == (0.05, 0.01)
    c = ExperimentConfig(lr={"all": 0.2, "hybrid": 0.3}, hybrid_lr=0.4)
    assert run_config(c, "lv", 0).lr == 0.2
    assert (run_config(c, "hybrid", 0).lr, run_config(c, "hybrid", 0).hybrid_lr) == (0.3, 0.4)
    assert run_config(c, "sa", 0).hybrid_lr is None and run_config(c, "sa", 0).switch_epoch \
        is None
    # the run takes the experiment's m, so A.2's CIFAR-100 m = 20 HA rate (0.007) applies
    c = ExperimentConfig(dataset="cifar100", m=20)
    assert run_config(c, "ha", 0).rates() == {"ha": 0.007}
    assert run_config(c, "hybrid", 0).rates() == {"sa": 0.005, "ha": 0.007}
    assert run_config(ExperimentConfig(dataset="cifar100", m=5), "ha", 0).rates() == {"ha": 0.001}


def test_ctrl_c_keeps_checkpoints_and_says_how_to_resume(tmp_path):
    config = ExperimentConfig(**SMALL, paradigms=["sa", "lv"])

    def interrupt(record):
        if record["paradigm"] == "lv":
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt, match="--resume") as info:
        run_experiment(config, out=str(tmp_path), on_epoch=interrupt)
    assert str(tmp_path / "checkpoints") in str(info.value)
    assert not (tmp_path / "results.json").exists()
    lines = []
    results, _ = run_experiment(config, out=str(tmp_path), resume=True, log=lines.append)
    assert not any("starting fresh" in line for line in lines)       # both checkpoints read
    assert sorted(results) == ["lv", "sa"]


def test_results_json_is_written_last(tmp_path, monkeypatch):
    config = ExperimentConfig(**SMALL, paradigms=["sa"])
    run_experiment(config, out=str(tmp_path))
    assert (tmp_path / "results.json").exists()
    import minimal_attn.experiments.plots as plots

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(plots, "plot_heatmap", interrupted)
    with pytest.raises(KeyboardInterrupt, match="--resume"):
        run_experiment(config, out=str(tmp_path), resume=True)
    # the old results.json is gone, so no reader pairs it with half-rewritten files
    assert not (tmp_path / "results.json").exists()
    monkeypatch.undo()
    run_experiment(config, out=str(tmp_path), resume=True)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["sa"]["test"]["per_seed"][0]["n"] == 20


def test_summary_puts_the_papers_table_1_beside_ours():
    entry = {split: {k: 0.5 for k in ("accuracy", "accuracy_std", "saif", "saif_std")}
             for split in ("train", "test")}
    md = summary_markdown({"lv": entry, "hybrid": entry}, 5, "cifar10")
    rows = md.splitlines()[2:]
    assert rows[0].endswith("| 77.9 | 62.0 |") and rows[1].endswith("| 76.6 | 59.0 |")
    assert summary_markdown({"lv": entry}, 7, "cifar10").splitlines()[2].endswith("| - | - |")
    assert PAPER_TABLE1["cifar100", 20]["ha"] == (1.7, 8.2)


def test_a_refused_run_keeps_the_checkpoints_other_runs_wrote(tmp_path):
    """LV diverges after SA finished: the refusal removes this call's other new files but
    keeps SA's checkpoint, from which a rerun with a sane lr resumes SA as done."""
    out = tmp_path / "run"
    config = ExperimentConfig(**SMALL, paradigms=["sa", "lv"], lr={"sa": 0.5, "lv": 1e9})
    with pytest.raises(InputError, match="diverged"):
        run_experiment(config, out=str(out))
    kept = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert kept == ["checkpoints/sa_seed0.ckpt", "checkpoints/sa_seed0.ckpt.prev"]
    config = ExperimentConfig(**SMALL, paradigms=["sa", "lv"], lr={"sa": 0.5, "lv": 0.5})
    results, meta = run_experiment(config, out=str(out), resume=True)
    assert meta["epochs_run"]["sa"] == {"0": 2}
    assert (out / "results.json").exists()


def test_first_seed_trains_a_later_block_of_seeds_as_a_longer_run_does(tmp_path):
    """--seeds 1 --first-seed 1 is seed 1 of --seeds 2: a cell's part adds up to the cell."""
    both, meta2 = run_experiment(ExperimentConfig(**SMALL, paradigms=["lv"], seeds=2))
    later, meta1 = run_experiment(ExperimentConfig(**SMALL, paradigms=["lv"], seeds=1,
                                                   first_seed=1))
    assert meta2["seeds"] == [0, 1] and meta1["seeds"] == [1]
    def numbers(entry):                                      # all but the wall time
        return {k: v for k, v in entry.items() if k != "seconds"}
    for split in ("train", "test"):
        [one] = later["lv"][split]["per_seed"]
        assert numbers(one) == numbers(both["lv"][split]["per_seed"][1])
        assert one["seed"] == 1
    assert list(meta1["epochs_run"]["lv"]) == ["1"]
    with pytest.raises(InputError, match="first_seed must be an integer >= 0"):
        run_experiment(ExperimentConfig(**SMALL, first_seed=-1))
