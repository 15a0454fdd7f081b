"""`attn-dyn agreement` and `attn-dyn train-seq`: files, keys, reuse of runs, bad input."""

import json

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli

pytest.importorskip("torch")
KEYS = ["A_alpha_beta_uf", "A_beta_uf_beta_px", "A_delta_beta_uf", "A_alpha_beta", "A_hat",
        "xi_alpha_beta_uf", "xi_alpha_beta", "xi_star"]
TINY = ["--steps", "20", "--hidden", "8", "--emb", "8", "--out-hidden", "8", "--max-train",
        "200", "--max-val", "40", "--eval-every", "10", "--proxy-d", "8", "--proxy-epochs", "2",
        "--vocab-size", "300", "--device", "cpu", "--no-progress"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("dataset,sub,rows", [("sst2", "sst2", "SST"),
                                              ("multi30k", "multi30k", "Multi30k")])
def test_tiny_end_to_end_and_reuse(tmp_path, shared_data, torch_one_thread, dataset, sub, rows):
    out = tmp_path / "run"
    tiny = list(TINY)
    if dataset == "multi30k":         # greedy decoding is the slow part: evaluate twice only
        tiny[tiny.index("--eval-every") + 1] = "20"
    r = run("agreement", "--dataset", dataset, "--data-dir", shared_data / sub, "--out", out,
            *tiny)
    assert r.exit_code == 0, r.output
    result = json.loads((out / "agreement.json").read_text())
    assert all(k in result for k in KEYS)
    for k in KEYS:
        assert 0.0 <= result[k] <= 1.0, k
    assert 0.0 < result["A_hat"] < 0.5
    assert result["xi_star"] == result["runs"]["second"][-1]["val_perf"]
    assert f"| {rows} (paper) |" in r.output and (out / "table.csv").exists()
    assert (out / "agreement_curves.png").stat().st_size > 1000
    took = next(line for line in r.output.splitlines() if line.startswith("Took "))
    assert "standard" in took and "steps 0-20: train" in took      # where the time went
    assert "model setup" in took
    runs = {p.name for p in (out / "runs").iterdir()}
    assert runs == ({"standard", "second", "uniform", "frozen"} if dataset == "sst2"
                    else {"standard", "second", "uniform"})
    if dataset == "multi30k":
        assert (out / "spm.model").exists() and result["runs"]["standard"][0]["val_bleu"] == 0
        assert "Table 6 (BLEU)" in result["variants"]
    else:
        assert "A_beta_uf_beta_log" in result and "A_alpha_alpha_fr" in result
    again = run("agreement", "--dataset", dataset, "--data-dir", shared_data / sub, "--out", out,
                *tiny)                                        # every run is reused
    assert again.exit_code == 0, again.output
    assert json.loads((out / "agreement.json").read_text())["A_alpha_beta"] == \
        result["A_alpha_beta"]
    clash = run("agreement", "--dataset", dataset, "--data-dir", shared_data / sub, "--out",
                out, *tiny, "--seed", "5")
    assert clash.exit_code == 2 and "different settings (seed=0 (now 5))" in clash.stderr


def test_train_seq_writes_history(tmp_path, shared_data, torch_one_thread):
    out = tmp_path / "u"
    r = run("train-seq", "--dataset", "sst2", "--data-dir", shared_data / "sst2", "--out", out,
            "--attention", "uniform", *TINY[:12], "--device", "cpu", "--no-progress")
    assert r.exit_code == 0, r.output
    history = json.loads((out / "history.json").read_text())
    assert [h["step"] for h in history] == [0, 10, 20]
    assert r.output.splitlines()[0] == "step\tval_perf\tval_bleu"
    assert "Stopped" not in r.output


def test_train_seq_says_where_a_time_limit_stopped_it(tmp_path, shared_data, torch_one_thread):
    """... and continues under other --threads."""
    out = tmp_path / "u"
    args = ["train-seq", "--dataset", "sst2", "--data-dir", shared_data / "sst2", "--out", out,
            *TINY[:12], "--device", "cpu", "--no-progress"]
    import torch

    r = run(*args, "--time-limit", "1e-9", "--threads", "2")
    assert r.exit_code == 0, r.output
    assert torch.get_num_threads() == 2
    assert "Stopped at step 10 of 20 by --time-limit" in r.output
    assert [h["step"] for h in json.loads((out / "history.json").read_text())] == [0, 10]
    r = run(*args, "--threads", "1")     # continues to the end: threads are run control
    assert r.exit_code == 0 and "Stopped" not in r.output
    assert torch.get_num_threads() == 1
    assert [h["step"] for h in json.loads((out / "history.json").read_text())] == [0, 10, 20]


def _bad(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "train.tsv").write_text("good\t2\n")
    (tmp_path / "lab" / "dev.tsv").write_text("good\t1\n")
    (tmp_path / "par").mkdir()
    (tmp_path / "par" / "train.src").write_text("a\nb\n")
    (tmp_path / "par" / "train.tgt").write_text("a\n")
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "train.tsv").write_bytes("caf\u00e9\t1\n".encode("latin-1"))
    (tmp_path / "enc" / "dev.tsv").write_text("a\t1\n")
    return [(["--dataset", "sst2", "--data-dir", tmp_path / "missing"], "does not exist"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab"], "labels must be 0 or 1"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "enc"], "UTF-8"),
            (["--dataset", "parallel", "--data-dir", tmp_path / "par"], "line-aligned"),
            (["--dataset", "tsv", "--task", "translate", "--data-dir", tmp_path / "lab"],
             "--task classify"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--steps", "0"], "--steps"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--max-train", "0"],
             "--max-train"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--max-len", "0"], "--max-len"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--dropout", "1"], "--dropout"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--warmup", "-1"], "--warmup"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--clip", "0"], "--clip"),
            (["--dataset", "tsv", "--data-dir", tmp_path / "lab", "--threads", "0"],
             "--threads must be an integer >= 1")]


@pytest.mark.parametrize("command", ["agreement", "train-seq"])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, command):
    for args, message in _bad(tmp_path):
        out = tmp_path / "out"
        r = run(command, *args, "--out", out, "--no-progress")
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1
        assert message in r.stderr, (message, r.stderr)
        assert not out.exists()
