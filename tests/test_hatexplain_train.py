"""Training the HateXplain text FCAM: learning, exact resume, the CLI and its bad inputs."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn import PARADIGMS
from minimal_attn.cli.main import cli
from minimal_attn.datasets import hatexplain
from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")
from minimal_attn.backends.vr.text_train import (  # noqa: E402
    HATEXPLAIN_LR,
    HYBRID_HA_LR,
    HateXplainConfig,
    TextTrainConfig,
    run_hatexplain,
    train_text_run,
    uniform_focus,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _toy_rows(n, split, seed):
    """Posts of neutral words; a toxic one holds 1-2 keywords, which are its rationale."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        tokens = [f"w{i}" for i in rng.integers(0, 30, rng.integers(3, 9))]
        rationale = [0] * len(tokens)
        toxic = rng.random() < 0.6
        if toxic:
            for _ in range(rng.integers(1, 3)):
                j = int(rng.integers(0, len(tokens) + 1))
                tokens.insert(j, f"bad{rng.integers(0, 4)}")
                rationale.insert(j, 1)
        rows.append({"post_id": f"{split}{k}", "tokens": tokens, "rationale": rationale,
                     "label": "toxic" if toxic else "non-toxic", "orig_split": split})
    return rows


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy_hatexplain")
    rows = _toy_rows(160, "train", 0) + _toy_rows(20, "val", 1) + _toy_rows(80, "test", 2)
    (folder / "hatexplain_binary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _encoded(folder):
    vocab, enc = hatexplain.encode_splits(hatexplain.read_hatexplain(folder), min_count=1)
    return len(vocab), enc


def test_paper_learning_rates_and_hybrid_schedule():
    assert HATEXPLAIN_LR == {"sa": 0.1, "ha": 0.1, "lv": 0.3} and HYBRID_HA_LR == 0.01
    config = TextTrainConfig(paradigm="hybrid", epochs=6)
    assert [config.phase(e) for e in range(6)] == ["sa"] * 3 + ["ha"] * 3
    assert [config.learning_rate(e) for e in (0, 2, 3, 5)] == [0.1, 0.1, 0.01, 0.01]
    assert TextTrainConfig(paradigm="lv").learning_rate(0) == 0.3


def test_per_paradigm_learning_rates():
    config = HateXplainConfig(lr={"sa": 0.05, "all": 0.2}, train=TextTrainConfig(hybrid_lr=None))
    assert config.run_config("hybrid", 0).rates() == {"sa": 0.05, "ha": 0.01}
    assert config.run_config("lv", 1).rates() == {"lv": 0.2}
    assert config.run_config("sa", 0).rates() == {"sa": 0.05}
    assert HateXplainConfig().run_config("ha", 0).rates() == {"ha": 0.1}


def test_uniform_focus_is_the_mean_rationale_share():
    # posts of 4 and 2 tokens with 1 and 2 rationale tokens; the third has none
    rationale = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=bool)
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=bool)
    assert uniform_focus(SimpleNamespace(rationale=rationale, mask=mask)) == \
        pytest.approx((1 / 4 + 2 / 2) / 2)


def _shared_slice(shared_data, folder, n_train, n_test):
    """The first posts of the shared data's train and test splits, as a data folder."""
    lines = (shared_data / "hatexplain" / "hatexplain_binary.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    train = [r for r in rows if r["orig_split"] == "train"][:n_train]
    test = [r for r in rows if r["orig_split"] == "test"][:n_test]
    folder.mkdir(exist_ok=True)
    (folder / "hatexplain_binary.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in train + test))
    return folder


def test_short_run_on_the_shared_data_beats_the_majority_class(shared_data, tmp_path):
    vocab_size, enc = _encoded(_shared_slice(shared_data, tmp_path, 2000, 600))
    majority = max(np.mean(enc["test"].y), 1 - np.mean(enc["test"].y))
    config = TextTrainConfig(paradigm="sa", epochs=3, batch_size=64, device="cpu")
    result = train_text_run(config, enc["train"], enc["test"], vocab_size)
    assert result["test"]["accuracy"] > majority + 0.03
    # the focus moves onto the rationale: mean a_z* grows over training
    history = result["history"]
    assert history[-1]["mean_a_z"] > history[0]["mean_a_z"] + 0.02
    assert result["test"]["n"] == int(np.sum(enc["test"].y == 1))        # toxic posts only


def _interrupt_after_second_epoch(epoch, record):
    if epoch == 1:
        raise KeyboardInterrupt("killed after two epochs")


def _timeless(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


@pytest.mark.parametrize("embedding", ["standard", "self-attention"])
def test_resume_equals_an_uninterrupted_run(toy_dir, tmp_path, embedding):
    """Killed after epoch 2 with a broken checkpoint: resume falls back to .ckpt.prev
    (epoch 1) and still ends exactly where the uninterrupted run does."""
    vocab_size, enc = _encoded(toy_dir)
    config = TextTrainConfig(paradigm="hybrid", embedding=embedding, epochs=3, switch_epoch=1,
                             batch_size=32, device="cpu", seed=1)
    whole = train_text_run(config, enc["train"], enc["test"], vocab_size, tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        train_text_run(config, enc["train"], enc["test"], vocab_size, tmp_path / "b",
                       callback=_interrupt_after_second_epoch)
    (tmp_path / "b" / "checkpoints" / "hybrid_seed1.ckpt").write_bytes(b"cut")
    lines = []
    resumed = train_text_run(config, enc["train"], enc["test"], vocab_size, tmp_path / "b",
                             resume=True, log=lines.append)
    assert resumed["resumed_from_epoch"] == 1 and "unreadable" in lines[0]
    assert _timeless(resumed["history"]) == _timeless(whole["history"])
    assert [h["phase"] for h in whole["history"]] == ["sa", "ha", "ha"]
    for split in ("train", "test"):
        assert resumed[split] == whole[split]
    a = torch.load(tmp_path / "a" / "checkpoints" / "hybrid_seed1.ckpt", weights_only=True)
    b = torch.load(tmp_path / "b" / "checkpoints" / "hybrid_seed1.ckpt", weights_only=True)
    for key, value in a["model"].items():
        assert torch.equal(b["model"][key], value), key


def run(*args, command="train-text"):
    return CliRunner().invoke(cli, [command] + [str(a) for a in args])


def test_cli_writes_the_cifar_results_layout(toy_dir, tmp_path):
    """``attn-dyn train --dataset hatexplain``: the result set of the CIFAR runs."""
    out = tmp_path / "out"
    r = run("--backend", "torch", "--dataset", "hatexplain", "--data-dir", toy_dir,
            "--embedding", "standard", "--paradigm", "all", "--epochs", 2, "--seeds", 2,
            "--batch-size", 32, "--min-count", 1, "--device", "cpu", "--threads", 1,
            "--out", out, "--no-progress", command="train")
    assert r.exit_code == 0, r.output
    results = json.loads((out / "results.json").read_text())
    assert list(results) == list(PARADIGMS)
    for p, entry in results.items():
        for split in ("train", "test"):
            e = entry[split]
            for key in ("accuracy", "saif"):
                assert 0.0 <= e[key] <= 1.0
                assert e[key] == pytest.approx(np.mean([s[key] for s in e["per_seed"]]))
            assert e["n_without_rationale"] + e["n"] == e["n_posts"]
            assert np.sum(e["heatmap"]) == pytest.approx(100.0)
            assert (out / f"heatmap_{p}_{split}.png").stat().st_size > 1000
        assert (out / "checkpoints" / f"{p}_seed1.ckpt").exists()
    config = json.loads((out / "config.json").read_text())
    assert config["lr"] == {"sa": 0.1, "ha": 0.1, "lv": 0.3, "hybrid": {"sa": 0.1, "ha": 0.01}}
    assert config["hybrid_switch_epochs"] == {"0": 1, "1": 1}
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert len(history) == 4 * 2 * 2            # paradigms x seeds x epochs
    assert {(h["paradigm"], h["seed"], h["epoch"]) for h in history} == {
        (p, s, e) for p in PARADIGMS for s in (0, 1) for e in (1, 2)}
    assert [h["phase"] for h in history if h["paradigm"] == "hybrid"] == ["sa", "ha"] * 2
    assert r.stdout.count(" epoch ") >= 16       # one line per epoch
    md = (out / "summary.md").read_text()
    assert "HateXplain-1" in md and "3-class" in md and "| hybrid |" in md
    assert md in r.stdout
    # a resumed run with every epoch done trains nothing and reproduces the results
    r2 = run("--data-dir", toy_dir, "--epochs", 2, "--seeds", 2, "--batch-size", 32,
             "--min-count", 1, "--device", "cpu", "--out", out, "--resume", "--no-progress")
    assert r2.exit_code == 0, r2.output
    again = json.loads((out / "results.json").read_text())
    for p in PARADIGMS:
        for key in ("saif", "seconds"):              # training seconds survive a resume
            assert again[p]["test"]["per_seed"][1][key] == results[p]["test"]["per_seed"][1][key]
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("paradigm,train_accuracy_mean,")     # no m column for text
    assert [row.split(",")[0] for row in rows[1:]] == list(PARADIGMS)
    assert float(rows[1].split(",")[1]) == pytest.approx(results["sa"]["train"]["accuracy"])
    r3 = run("--data-dir", toy_dir, "--epochs", 2, "--seeds", 2, "--batch-size", 32,
             "--min-count", 1, "--device", "cpu", "--out", out, "--resume", "--lr", 0.05)
    assert r3.exit_code == 2 and "different settings" in r3.stderr


def test_cli_train_hatexplain_on_the_shared_data_is_the_library_call(shared_data, tmp_path):
    """``--dataset hatexplain`` is an option of ``train`` (no other command behind it): on
    a slice of the shared posts it gives run_hatexplain's numbers for the same settings;
    the options not given keep HateXplainConfig's defaults."""
    folder = _shared_slice(shared_data, tmp_path / "hx", 300, 100)
    out = tmp_path / "cli"
    r = run("--dataset", "hatexplain", "--data-dir", folder, "--embedding", "self-attention",
            "--paradigm", "sa,hybrid", "--epochs", 2, "--batch-size", 64, "--threads", 1,
            "--device", "cpu", "--no-progress", "--out", out, command="train")
    assert r.exit_code == 0, r.output
    assert r.stdout.count(" epoch ") == 2 * 2 and "mean a_z* " in r.stdout
    ours = json.loads((out / "results.json").read_text())
    config = HateXplainConfig(train=TextTrainConfig(embedding="self-attention", epochs=2,
                                                    batch_size=64, device="cpu"),
                              paradigms=("sa", "hybrid"))
    library, meta = run_hatexplain(config, folder)
    assert list(ours) == ["sa", "hybrid"]
    for p in ours:
        for split in ("train", "test"):
            for key in ("accuracy", "saif", "n", "n_without_rationale"):
                assert ours[p][split][key] == library[p][split][key], (p, split, key)
    written = json.loads((out / "config.json").read_text())
    assert written["paper_row"] == "HateXplain-2" and written["paradigms"] == ["sa", "hybrid"]
    assert written["min_count"] == HateXplainConfig().min_count == 2
    assert written["lr"] == {"sa": 0.1, "hybrid": {"sa": 0.1, "ha": 0.01}}
    assert written["posts"] == meta["posts"] and sum(meta["posts"].values()) <= 400
    assert written["hybrid_switch_epochs"] == {"0": 1}
    assert "HateXplain-2" in (out / "summary.md").read_text()


def _bad_dir(tmp_path, row):
    folder = tmp_path / "bad"
    folder.mkdir()
    rows = _toy_rows(5, "train", 0) + [row]
    (folder / "hatexplain_binary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.mark.parametrize("command", ["train-text", "train"])
@pytest.mark.parametrize("row,message", [
    ({"post_id": "x", "tokens": ["a", "b", "c"], "label": "toxic", "rationale": [0, 1],
      "orig_split": "train"}, "rationale has 2 entries but the post has 3 tokens"),
    ({"post_id": "x", "tokens": ["a"], "label": "spam", "rationale": [0],
      "orig_split": "train"}, "unknown label 'spam'"),
])
def test_cli_bad_jsonl_exits_2_with_one_line_and_writes_nothing(tmp_path, row, message,
                                                                command):
    out = tmp_path / "out"
    r = run("--backend", "torch", "--dataset", "hatexplain", "--data-dir",
            _bad_dir(tmp_path, row), "--out", out, "--device", "cpu", command=command)
    assert r.exit_code == 2
    assert r.stderr.startswith("Error:") and len(r.stderr.strip().splitlines()) == 1
    assert message in r.stderr and "line 6" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("args,message", [
    (["--data-dir", "/nonexistent/hatexplain"], "does not exist"),
    (["--epochs", 0], "--epochs must be an integer >= 1"),
    (["--resume"], "resume needs --out"),
    (["--threads", 0], "--threads must be an integer >= 1"),
    (["--embedding", "lstm"], "Invalid value for '--embedding'"),
    (["--paradigm", "soft,bogus"], "unknown paradigm 'bogus'"),
])
def test_cli_bad_options_exit_2(toy_dir, args, message):
    base = [] if "--data-dir" in args else ["--data-dir", toy_dir]
    r = run(*(base + args + ["--device", "cpu"]))
    assert r.exit_code == 2, r.output
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_seed_that_diverges_is_recorded_and_the_others_go_on(toy_dir, tmp_path, monkeypatch):
    """on_divergence="record": seed 1, given a learning rate of 1e6, diverges for real
    (check_divergence) and is named; seeds 0 and 2 give the same numbers as without it.
    The default refuses the run, and a paradigm whose every seed diverges is refused."""
    from dataclasses import replace

    from minimal_attn.backends.vr.hatexplain_table1 import HateXplainTable1
    from minimal_attn.errors import DivergedError

    train = TextTrainConfig(epochs=2, batch_size=32, device="cpu")
    clean, _ = run_hatexplain(HateXplainConfig(train=train, paradigms=("lv",), seeds=3,
                                               min_count=1), toy_dir)
    own = HateXplainTable1.run_config
    bad = {1}
    monkeypatch.setattr(HateXplainTable1, "run_config", lambda self, p, seed: replace(
        own(self, p, seed), lr=1e6) if seed in bad else own(self, p, seed))
    config = HateXplainConfig(train=train, paradigms=("lv",), seeds=3, min_count=1,
                              on_divergence="record")
    out = tmp_path / "rec"
    results, _ = run_hatexplain(config, toy_dir, out_dir=str(out))
    entry = results["lv"]
    assert list(entry["diverged"]) == ["1"] and "lv seed 1 diverged" in entry["diverged"]["1"]
    assert [s["seed"] for s in entry["test"]["per_seed"]] == [0, 2]
    for k in (0, 2):
        assert entry["test"]["per_seed"][k // 2]["accuracy"] == \
            clean["lv"]["test"]["per_seed"][k]["accuracy"]
    assert json.loads((out / "results.json").read_text())["lv"]["diverged"] == entry["diverged"]
    md = (out / "summary.md").read_text()           # the summaries say which seeds they average
    assert "Diverged, left out of the means: lv seed 1." in md
    assert "| 0, 2 (seed 1 diverged) |" in md
    assert (out / "summary.csv").read_text().splitlines()[1].endswith(",0 2,1")
    with pytest.raises(DivergedError, match="lv seed 1 diverged"):
        run_hatexplain(replace(config, on_divergence="stop"), toy_dir)
    bad.update({0, 2})
    with pytest.raises(DivergedError, match="lv seed 2 diverged"):
        run_hatexplain(config, toy_dir)
    with pytest.raises(InputError, match="on_divergence must be stop or record"):
        run_hatexplain(replace(config, on_divergence="skip"), toy_dir)


def test_a_metric_no_post_defines_is_shown_as_n_a():
    # SAIF over posts of which none has a rationale is NaN: the tables say n/a, not "nan ± 0.0"
    from minimal_attn.experiments.train_report import pct

    assert pct({"saif": float("nan"), "saif_std": 0.0}, "saif") == "n/a"
    assert pct({"accuracy": 0.5, "accuracy_std": 0.125}, "accuracy") == "50.0 ± 12.5"
