"""HateXplain inputs the reader and the settings must refuse or survive (V&R Section 5, A.3)."""

import json
from dataclasses import fields

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.datasets import hatexplain
from minimal_attn.errors import InputError
from minimal_attn.experiments import hatexplain_report as report
from minimal_attn.experiments.train_loop import TrainConfig


def run(*args):
    return CliRunner().invoke(cli, ["train"] + [str(a) for a in args])


def _jsonl(folder, rows):
    folder.mkdir(exist_ok=True)
    (folder / "hatexplain_binary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


LITERAL_SPECIALS = [
    {"post_id": "a", "tokens": ["go", "<pad>", "away", "pest"], "label": "toxic",
     "rationale": [0, 0, 0, 1], "orig_split": "train"},
    {"post_id": "b", "tokens": ["hello", "<unk>", "there", "<pad>"], "label": "non-toxic",
     "orig_split": "train"},
    {"post_id": "c", "tokens": ["<pad>", "pest"], "label": "toxic", "rationale": [0, 1],
     "orig_split": "test"},
]


def test_a_literal_pad_or_unk_word_is_an_unknown_word_not_the_padding(tmp_path):
    data = hatexplain.read_hatexplain(_jsonl(tmp_path / "hx", LITERAL_SPECIALS))
    vocab, enc = hatexplain.encode_splits(data, min_count=1)
    assert vocab.itos[:2] == ["<pad>", "<unk>"] and len(set(vocab.itos)) == len(vocab)
    go, away, pest = (vocab.stoi[w] for w in ("go", "away", "pest"))
    assert enc["train"].ids[0].tolist() == [go, 1, away, pest]              # <unk> is id 1
    assert enc["train"].ids[1].tolist() == [vocab.stoi["hello"], 1, vocab.stoi["there"], 1]
    assert enc["test"].ids[0].tolist() == [1, vocab.stoi["pest"]]
    assert enc["test"].mask[0].tolist() == [True, True]     # a real token, not padding
    assert data.splits["train"].tokens[0][1] == "<pad>"    # the posts themselves unchanged


@pytest.mark.usefixtures("torch_one_thread")
def test_cli_trains_on_posts_with_a_literal_pad(tmp_path):
    out = tmp_path / "out"
    r = run("--dataset", "hatexplain", "--data-dir", _jsonl(tmp_path / "hx", LITERAL_SPECIALS),
            "--paradigm", "sa", "--epochs", 1, "--min-count", 1, "--device", "cpu",
            "--threads", 1, "--no-progress", "--out", out)
    assert r.exit_code == 0, r.output
    assert json.loads((out / "config.json").read_text())["vocab_size"] == 2 + 5


def _original(folder, annotators):
    folder.mkdir(exist_ok=True)
    post = {"post_id": "p7", "annotators": annotators, "rationales": [[1, 0]],
            "post_tokens": ["you", "pest"]}
    ok = {"post_id": "p1", "annotators": [{"label": "offensive"}] * 3, "rationales": [],
          "post_tokens": ["a", "b"]}
    (folder / "dataset.json").write_text(json.dumps({"p1": ok, "p7": post}))
    (folder / "post_id_divisions.json").write_text(
        json.dumps({"train": ["p1"], "val": [], "test": ["p7"]}))
    return folder


BAD_ANNOTATORS = [None, ["hatespeech", "hatespeech", "normal"],
                  {"label": ["hatespeech", "hatespeech", "normal"], "annotator_id": [1, 2, 3]},
                  [], [{"annotator_id": 1}], [{"label": "normal"}, "normal"]]


@pytest.mark.parametrize("annotators", BAD_ANNOTATORS)
def test_malformed_annotators_are_refused_naming_the_post(tmp_path, annotators):
    with pytest.raises(InputError, match="post p7: annotators must be a list of objects, "
                                         "each with a label"):
        hatexplain.read_hatexplain(_original(tmp_path / "hx", annotators))


@pytest.mark.usefixtures("torch_one_thread")
@pytest.mark.parametrize("annotators", BAD_ANNOTATORS[:3])
def test_cli_malformed_annotators_exit_2_with_one_line(tmp_path, annotators):
    out = tmp_path / "out"
    r = run("--dataset", "hatexplain", "--data-dir", _original(tmp_path / "hx", annotators),
            "--device", "cpu", "--out", out)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("Error:") and len(r.stderr.strip().splitlines()) == 1
    assert "post p7: annotators must be" in r.stderr and not out.exists()


def test_wellformed_annotators_still_read(tmp_path):
    data = hatexplain.read_hatexplain(_original(
        tmp_path / "hx", [{"label": "hatespeech"}, {"label": "hatespeech"}, {"label": "normal"}]))
    assert data.splits["test"].y.tolist() == [0] and data.splits["train"].y.tolist() == [1]


# TrainConfig's fields the text FCAM reads (the rest must be in IGNORED): a new TrainConfig
# field fails this until someone decides which it is.
USED = {"paradigm", "epochs", "lr", "hybrid_lr", "momentum", "stop_loss", "batch_size", "seed",
        "switch_epoch", "device", "threshold", "n_classes", "eval_every", "checkpoint_every",
        "time_limit"}
OTHER = {"optimizer": "adam", "focus_init": "mirror", "width": 2.0, "classifier": "lenet",
         "pixels": "half", "m": 5, "chunk": 64, "compile": "compile", "conv_mode": "loop",
         "precision": "bf16", "dataset": "cifar10"}


@pytest.mark.usefixtures("torch_one_thread")
def test_every_trainconfig_field_is_read_or_refused_by_the_text_fcam():
    from minimal_attn.backends.vr.hatexplain_table1 import IGNORED

    assert USED | set(IGNORED) == {f.name for f in fields(TrainConfig)}
    assert not USED & set(IGNORED) and set(OTHER) == set(IGNORED)


@pytest.mark.usefixtures("torch_one_thread")
@pytest.mark.parametrize("name", sorted(OTHER))
def test_a_setting_the_text_fcam_ignores_is_refused(name):
    from minimal_attn.backends.vr.hatexplain_table1 import TextTrainConfig

    with pytest.raises(InputError, match=f"{name}=.* does not apply to the text FCAM") as exc:
        TextTrainConfig(**{name: OTHER[name]})
    assert exc.value.param == name
    if name == "optimizer":
        assert "train with SGD and momentum (V&R App. A.3)" in str(exc.value)


@pytest.mark.usefixtures("torch_one_thread")
def test_defaults_and_used_settings_still_build():
    from minimal_attn.backends.vr.hatexplain_table1 import TextTrainConfig

    config = TextTrainConfig(optimizer="sgd", dataset="hatexplain", momentum=0.5, seed=3)
    assert (config.momentum, config.seed, config.dataset) == (0.5, 3, "hatexplain")


@pytest.mark.parametrize("max_len", [0, -3, 1.5, True, "8"])
def test_max_len_must_be_none_or_a_positive_integer(tmp_path, max_len):
    pytest.importorskip("torch")
    from minimal_attn.backends.vr.hatexplain_table1 import HateXplainConfig, run_hatexplain

    folder = _jsonl(tmp_path / "hx", LITERAL_SPECIALS)
    with pytest.raises(InputError, match="max_len must be an integer >= 1") as exc:
        run_hatexplain(HateXplainConfig(max_len=max_len, min_count=1), folder)
    assert exc.value.param == "max_len"
    data = hatexplain.read_hatexplain(folder)
    with pytest.raises(InputError, match="max_len must be an integer >= 1"):
        hatexplain.encode_splits(data, min_count=1, max_len=max_len)
    _, enc = hatexplain.encode_splits(data, min_count=1, max_len=2)
    assert enc["train"].ids.shape == (2, 2) and enc["train"].mask.all()


def _entry(seeds, diverged=()):
    split = {"accuracy": 0.6, "accuracy_std": 0.1, "saif": 0.2, "saif_std": 0.05,
             "n": 10, "n_without_rationale": 5,
             "per_seed": [{"seed": s, "accuracy": 0.6, "saif": 0.2} for s in seeds]}
    entry = {"train": dict(split), "test": dict(split), "seconds": 1.0}
    if diverged:
        entry["diverged"] = {str(s): f"lv seed {s} diverged; lower the learning rate lr"
                             for s in diverged}
    return entry


def test_summary_names_the_seeds_averaged_and_the_diverged_ones(tmp_path):
    results = {"sa": _entry([0, 1]), "lv": _entry([0], diverged=[1])}
    meta = {"embedding": "standard", "layout": "binary", "seeds": [0, 1], "epochs": 2,
            "device": "cpu"}
    md = report.summary_markdown(results, meta)
    assert "Diverged, left out of the means: lv seed 1." in md
    rows = {line.split(" | ")[0].strip("| "): line for line in md.splitlines()
            if line.startswith("| sa ") or line.startswith("| lv ")}
    assert rows["sa"].endswith("| 0, 1 |") and rows["lv"].endswith("| 0 (seed 1 diverged) |")
    assert "Diverged" not in report.summary_markdown({"sa": _entry([0, 1])}, meta)
    # summary.csv's seeds columns (every run's, train_report.write_results) read the same
    assert report.seeds_used(results["sa"]) == ([0, 1], [])
    assert report.seeds_used(results["lv"]) == ([0], [1])
