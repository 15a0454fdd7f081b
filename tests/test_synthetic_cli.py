"""``attn-dyn synthetic``: a tiny run per task, resume, bad input (exit 2, one line)."""

import json

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from minimal_attn.cli.main import cli  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
TINY = ["--steps", "2", "--hidden", "4", "--embed", "3", "--batch-size", "3",
        "--n-test", "4", "--eval-every", "1", "--no-progress"]


def _run(args):
    return CliRunner().invoke(cli, ["synthetic", *args], catch_exceptions=False)


@pytest.mark.parametrize("task,conditions", [
    ("copy", {"permutation", "control"}),
    ("copy-control", {"control"}),
    ("copy-mixture", {"mixture", "control"}),
    ("permute", {"permutation-function", "copy"}),
    ("keyword", {"keyword"}),
])
def test_tiny_run_writes_results(tmp_path, task, conditions):
    out = tmp_path / "o"
    res = _run([task, "--seeds", "2", *TINY, "--out", str(out)])
    assert res.exit_code == 0, res.output
    r = json.loads((out / "results.json").read_text())
    assert len(r["seeds"]) == 2 and set(r["conditions"]) == conditions
    for s in r["seeds"]:
        assert s["step"] == [0, 1, 2] and len(s["accuracy"]) == 3
        assert all(0 <= a <= 1 for a in s["accuracy"])
    assert 0 <= r["converged_fraction"] <= 1 and 0 <= r["failed_fraction"] <= 1
    for name in r["figures"].values():
        assert (out / name).stat().st_size > 0
    if task == "keyword":
        assert {"gamma_lstar", "gamma_lstar_next", "gamma_mean", "gamma_last"} <= set(r["seeds"][0])


def test_multihead_screens_and_caches_pool(tmp_path):
    out = tmp_path / "mh"
    args = ["multihead", "--seeds", "2", "--heads", "2", "--pool", "3", *TINY, "--out", str(out)]
    res = _run(args)
    assert res.exit_code == 0, res.output
    r = json.loads((out / "results.json").read_text())
    pool = json.loads((out / "head_pool.json").read_text())
    assert sorted(pool["good"] + pool["bad"]) == [0, 1, 2]
    assert len(r["seeds"]) == 2 and all(s["condition"] == "independent" for s in r["seeds"])
    assert set(r["conditions"]) | set(r["skipped"]) == {"independent", "one-good", "all-bad"}
    # a new run in that folder is refused (it holds a run); in a new folder holding only
    # the cached pool, the pool is reused, not screened again (no screening checkpoint)
    again = _run(args)
    assert again.exit_code == 2 and "already holds a run" in again.output
    fresh = tmp_path / "mh4"
    fresh.mkdir()
    (fresh / "head_pool.json").write_bytes((out / "head_pool.json").read_bytes())
    assert _run([*args[:-1], str(fresh)]).exit_code == 0
    assert not (fresh / "checkpoints" / "head_pool.ckpt").exists()
    assert json.loads((fresh / "head_pool.json").read_text()) == pool


def test_resume_continues_exactly(tmp_path):
    common = ["copy-control", "--seeds", "2", *TINY[2:]]
    full = _run([*common, "--steps", "4", "--hidden", "4", "--out", str(tmp_path / "a")])
    part = _run([*common, "--steps", "2", "--hidden", "4", "--out", str(tmp_path / "b")])
    rest = _run([*common, "--steps", "4", "--hidden", "4", "--out", str(tmp_path / "b"),
                 "--resume"])
    assert full.exit_code == part.exit_code == rest.exit_code == 0
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    assert b["resumed_from_step"] == 2
    assert [s["accuracy"] for s in a["seeds"]] == [s["accuracy"] for s in b["seeds"]]


def test_resume_to_more_steps_keeps_the_default_cadence(tmp_path):
    """Without --eval-every the default is a twentieth of --steps: 40 steps evaluate every
    2. Resumed to 60 steps, the run keeps evaluating every 2 (not every 3, which the
    checkpoint would refuse) and ends where one run given --eval-every 2 does."""
    common = ["copy-control", "--seeds", "1", *TINY[2:8], "--no-progress"]
    assert "--eval-every" not in common
    part = tmp_path / "part"
    assert _run([*common, "--steps", "40", "--out", str(part)]).exit_code == 0
    rest = _run([*common, "--steps", "60", "--out", str(part), "--resume"])
    assert rest.exit_code == 0, rest.output
    whole = tmp_path / "whole"
    assert _run([*common, "--steps", "60", "--eval-every", "2",
                 "--out", str(whole)]).exit_code == 0
    a, b = (json.loads((p / "results.json").read_text())["seeds"][0] for p in (part, whole))
    assert a["step"] == b["step"] == list(range(0, 61, 2))
    assert a["accuracy"] == b["accuracy"]


@pytest.mark.parametrize("args,needle", [
    (["copy", "--seeds", "0"], "--seeds"),
    (["copy", "--hidden", "-3"], "--hidden"),
    (["copy", "--lr", "0"], "--lr"),
    (["multihead", "--heads", "0"], "--heads"),
    (["multihead", "--vocab", "39"], "--vocab"),
    (["tsp"], "tsp"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    out = tmp_path / "never"
    res = CliRunner().invoke(cli, ["synthetic", *args, "--steps", "1", "--out", str(out)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0], res.output
    assert not out.exists()


def test_resume_with_other_settings_refused(tmp_path):
    out = str(tmp_path / "o")
    assert _run(["copy-control", "--seeds", "1", *TINY, "--out", out]).exit_code == 0
    res = CliRunner().invoke(cli, ["synthetic", "copy-control", "--seeds", "1", *TINY,
                                   "--lr", "0.5", "--out", out, "--resume"])
    assert res.exit_code == 2 and "different settings" in res.output


def test_multihead_vocab_reaches_the_model_and_the_cache(tmp_path):
    out = tmp_path / "mh60"
    args = ["multihead", "--seeds", "1", "--heads", "2", "--pool", "2", "--vocab", "60", *TINY,
            "--out", str(out)]
    assert _run(args).exit_code == 0
    assert json.loads((out / "results.json").read_text())["config"]["vocab"] == 60
    assert json.loads((out / "head_pool.json").read_text())["meta"]["config"]["vocab"] == 60
    state = torch.load(out / "checkpoints" / "train.ckpt", weights_only=True)
    assert state["params"]["emb_src"].shape[1] == 61                  # ids 0..60


@pytest.mark.parametrize("alias,paradigm", [("lvml", "lv"), ("hard", "ha"), ("soft", "sa")])
def test_the_paradigm_aliases_of_every_command_are_accepted(tmp_path, alias, paradigm):
    """The aliases ``ode``, ``fixed-focus`` and ``train`` take (errors.PARADIGM_ALIASES)."""
    out = tmp_path / alias
    res = _run(["copy-control", "--seeds", "1", *TINY, "--paradigm", alias, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "results.json").read_text())["config"]["paradigm"] == paradigm
