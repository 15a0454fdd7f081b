"""``--paradigm`` on ``attn-dyn synthetic``, ``train-seq`` and ``agreement`` (issue 23)."""

import json

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from minimal_attn.cli.main import cli  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
TINY = ["--steps", "4", "--hidden", "4", "--embed", "3", "--batch-size", "3",
        "--n-test", "4", "--eval-every", "1", "--no-progress"]


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_synthetic_paradigms_write_the_sa_format(tmp_path):
    """Every paradigm writes results.json with SA's keys; SA's own results gain nothing."""
    results = {}
    for p, extra in (("sa", []), ("ha", []), ("lv", []), ("hybrid", ["--switch-step", "2"]),
                     ("hybrid", ["--switch-step", "auto"])):
        out = tmp_path / (p + "".join(extra[1:]))
        res = _run("synthetic", "copy", "--seeds", "2", *TINY, "--paradigm", p, *extra,
                   "--out", out)
        assert res.exit_code == 0, res.output
        results[out.name] = json.loads((out / "results.json").read_text())
    sa = results["sa"]
    assert "focus" not in sa["seeds"][0] and "switch_step" not in sa["seeds"][0]
    for name, r in results.items():
        assert set(sa) <= set(r) and set(sa["conditions"]) == set(r["conditions"])
        for s in r["seeds"]:
            assert set(sa["seeds"][0]) <= set(s) and s["step"] == [0, 1, 2, 3, 4]
            assert all(0 <= a <= 1 for a in s["accuracy"])
        if name != "sa":
            assert r["config"]["paradigm"] == name.replace("2", "").replace("auto", "")
            assert all(1 / 40 - 1e-9 <= f <= 1 for s in r["seeds"] for f in s["focus"])
    assert all(s["switch_step"] == 2 for s in results["hybrid2"]["seeds"])
    # auto: no later than the latest switch, steps - steps // 4 = 3
    assert all(s["switch_step"] in (1, 2, 3) for s in results["hybridauto"]["seeds"])
    # before its switch the hybrid is SA, step for step (same seeds, same data)
    for h, s in zip(results["hybrid2"]["seeds"], sa["seeds"]):
        assert h["accuracy"][:2] == s["accuracy"][:2]


class StopError(Exception):
    pass


def test_synthetic_hybrid_auto_resumes_exactly(tmp_path):
    """An interrupted auto hybrid continues with the switches it had chosen; a hybrid
    refuses to be extended (its switch depends on the steps)."""
    from minimal_attn.backends.snell.synthetic_experiments import run_synthetic
    from minimal_attn.backends.snell.synthetic_train import SyntheticConfig

    config = SyntheticConfig(steps=6, hidden=4, embed=3, batch_size=3, n_test=4, eval_every=1,
                             paradigm="hybrid", switch_step="auto")

    def stop(label, step, total, note=None):       # the one progress shape
        if step == 4:
            raise StopError
    a = run_synthetic("copy-control", config, seeds=2, out_dir=str(tmp_path / "a"))
    with pytest.raises(StopError):
        run_synthetic("copy-control", config, seeds=2, out_dir=str(tmp_path / "b"),
                      progress=stop)
    b = run_synthetic("copy-control", config, seeds=2, out_dir=str(tmp_path / "b"),
                      resume=True)
    assert b["resumed_from_step"] == 4              # the checkpoint written before the stop
    assert [s["accuracy"] for s in a["seeds"]] == [s["accuracy"] for s in b["seeds"]]
    assert [s["switch_step"] for s in a["seeds"]] == [s["switch_step"] for s in b["seeds"]]
    res = _run("synthetic", "copy-control", "--seeds", "2", *TINY[2:], "--steps", "8",
               "--hidden", "4", "--paradigm", "hybrid", "--switch-step", "auto", "--out",
               tmp_path / "b", "--resume")
    assert res.exit_code == 2 and "different settings" in res.output


@pytest.mark.parametrize("args,needle", [
    (["keyword", "--paradigm", "lv"], "--paradigm"),
    (["multihead", "--paradigm", "ha"], "--paradigm"),
    (["copy", "--paradigm", "hybrid", "--switch-step", "9"], "--switch-step"),
    (["copy", "--paradigm", "hybrid", "--switch-step", "soon"], "--switch-step"),
])
def test_synthetic_bad_paradigm_exits_2_with_one_line(tmp_path, args, needle):
    out = tmp_path / "never"
    res = _run("synthetic", *args, "--steps", "2", "--out", out)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0], res.output
    assert not out.exists()


SEQ_TINY = ["--steps", "10", "--hidden", "8", "--emb", "8", "--max-train", "200", "--max-val",
            "40", "--eval-every", "5", "--proxy-d", "8", "--proxy-epochs", "1", "--device",
            "cpu", "--no-progress", "--no-kendall"]


def test_agreement_lv_writes_agreement_json(tmp_path, shared_data):
    out = tmp_path / "lv"
    res = _run("agreement", "--task", "classify", "--dataset", "sst2", "--data-dir",
               shared_data / "sst2", "--out", out, *SEQ_TINY, "--paradigm", "lv")
    assert res.exit_code == 0, res.output
    r = json.loads((out / "agreement.json").read_text())
    assert r["config"]["paradigm"] == "lv"
    assert 0 <= r["A_alpha_beta"] <= 1 and 0 <= r["A_alpha_beta_px"] <= 1
    assert all("val_focus" in h for h in r["runs"]["standard"])
    assert "val_focus" not in r["runs"]["uniform"][0]          # beta^uf stays Snell's SA model
    cfg = json.loads((out / "runs" / "uniform" / "config.json").read_text())
    assert cfg["paradigm"] == "sa"
    assert json.loads((out / "runs" / "standard" / "config.json").read_text())["paradigm"] == "lv"


def test_train_seq_accepts_the_hard_alias_and_refuses_a_bad_switch(tmp_path, shared_data):
    common = ["train-seq", "--dataset", "sst2", "--data-dir", shared_data / "sst2", "--steps",
              "10", "--hidden", "8", "--emb", "8", "--max-train", "200", "--max-val", "40",
              "--eval-every", "5", "--device", "cpu", "--no-progress"]
    res = _run(*common, "--out", tmp_path / "h", "--paradigm", "hard")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "h" / "config.json").read_text())["paradigm"] == "ha"
    bad = _run(*common, "--out", tmp_path / "x", "--paradigm", "hybrid", "--switch-step", "-1")
    assert bad.exit_code == 2 and "switch_step" in bad.output.replace("-", "_")
