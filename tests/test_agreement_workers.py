"""A Table 2 row with its models side by side in worker processes (AgreementConfig.workers):
the same row as one after another, one progress task, refusals and crashes reported."""

import json
import os

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement  # noqa: E402
from minimal_attn.backends.snell.workers import run_jobs  # noqa: E402
from minimal_attn.cli.main import cli  # noqa: E402
from minimal_attn.errors import DivergedError, InputError  # noqa: E402

TINY = dict(steps=20, hidden=8, emb=8, out_hidden=8, max_train=200, max_val=40, eval_every=10,
            proxy_d=8, proxy_epochs=2, device="cpu")


def test_workers_train_the_same_row_as_one_after_another(tmp_path, shared_data,
                                                         torch_one_thread):
    heard = []
    rows = {}
    for workers in (1, 3):
        c = AgreementConfig(dataset="sst2", data_dir=str(shared_data / "sst2"), workers=workers,
                            **TINY)
        rows[workers] = run_agreement(c, str(tmp_path / f"w{workers}"),
                                      progress=(lambda *a: heard.append(a)) if workers > 1
                                      else None)
    one, side = (json.loads(json.dumps(rows[w], default=str)) for w in (1, 3))
    assert one["runs"].keys() == {"standard", "second", "uniform", "frozen"}
    assert side["config"].pop("workers") == 3 and one["config"].pop("workers") == 1
    # where the time went: each job's wall seconds, each model's per-call record
    took = {w: r.pop("seconds") for w, r in ((1, one), (3, side))}
    assert set(took[1]["jobs"]) == set(one["runs"])
    assert set(took[3]["jobs"]) == set(one["runs"]) | {"proxy", "logistic"}
    for t in took.values():
        assert all(s > 0 for s in t["jobs"].values())
        assert t["row"] >= t["all_jobs"] >= max(t["jobs"].values())
        for name, calls in t["models"].items():      # one call, every evaluation in it
            assert [(c["from_step"], c["to_step"], c["evals"]) for c in calls] == \
                [(0, 20, len(one["runs"][name]))]
            assert all(c["train_s"] > 0 and c["eval_s"] > 0 and c["setup_s"] > 0
                       for c in calls)
    assert side == one                 # every number: the models, the proxies, the tables
    for name in one["runs"]:           # the checkpoints hold the same weights
        import torch

        a, b = (torch.load(tmp_path / w / "runs" / name / "checkpoint.pt", weights_only=False)
                for w in ("w1", "w3"))
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    # one task for the workers, its count rising to the summed steps and the two proxies'
    # units
    models = [h for h in heard if h[0] == "models"]
    dones = [h[1] for h in models]
    assert dones == sorted(dones) and dones[-1] == models[-1][2] == 4 * 20 + 2
    assert any(h[3] and h[3].startswith(("standard: ", "second: ")) for h in models)


def _count(n, task=None, progress=None, log=None):
    for k in range(n + 1):
        progress("ignored", k, n, None)
    log(f"counted {n}")


def _refuse(task=None, progress=None, log=None):
    raise InputError("steps must be an integer >= 1, got 0", param="steps")


def _diverge(task=None, progress=None, log=None):
    raise DivergedError("training diverged at step 3 (the loss is not finite); lower --lr",
                        param="lr")


def _crash(task=None, progress=None, log=None):
    os._exit(3)


def _fail(task=None, progress=None, log=None):
    raise ZeroDivisionError("a bug in a job")


def test_jobs_report_together_and_refusals_and_crashes_come_back():
    heard, lines = [], []
    run_jobs({"a": (_count, (3,), 3), "b": (_count, (5,), 5)}, 2,
             progress=lambda *a: heard.append(a), log=lines.append)
    assert heard[-1][:3] == ("models", 8, 8) and sorted(lines) == ["counted 3", "counted 5"]
    with pytest.raises(InputError, match="steps must be an integer >= 1") as err:
        run_jobs({"a": (_count, (3,), 3), "bad": (_refuse, (), 1)}, 2)
    assert err.value.param == "steps" and not isinstance(err.value, DivergedError)
    # a divergence in a worker comes back as one (a Table 1 driver may record it)
    with pytest.raises(DivergedError, match="diverged at step 3") as err:
        run_jobs({"a": (_count, (3,), 3), "bad": (_diverge, (), 1)}, 2)
    assert err.value.param == "lr"
    with pytest.raises(RuntimeError, match="worker for dead ended with exit code 3"):
        run_jobs({"dead": (_crash, (), 1)}, 2)
    with pytest.raises(RuntimeError, match="ZeroDivisionError: a bug in a job"):
        run_jobs({"bug": (_fail, (), 1)}, 2)
    for bad in (0, 1.5, True):
        with pytest.raises(InputError, match="workers must be an integer >= 1"):
            run_jobs({}, bad)


def test_a_model_whose_update_overflows_is_a_divergence(tmp_path, shared_data,
                                                        torch_one_thread):
    from minimal_attn.backends.snell.agreement import train_one

    config = AgreementConfig(dataset="sst2", data_dir=str(shared_data / "sst2"),
                             **dict(TINY, lr=3e38))
    with pytest.raises(DivergedError, match="training diverged at step"):
        train_one(config, "learned", str(tmp_path / "m"))
    assert not (tmp_path / "m").exists()


def test_bad_workers_one_line_exit_2_nothing_written(tmp_path, shared_data):
    out = tmp_path / "run"
    r = CliRunner().invoke(cli, ["agreement", "--dataset", "sst2", "--data-dir",
                                 str(shared_data / "sst2"), "--out", str(out), "--workers", "0",
                                 "--no-progress"])
    assert r.exit_code == 2 and "--workers must be an integer >= 1" in r.output
    assert "Traceback" not in r.output and not out.exists()


def _orphan(path, task=None, progress=None, log=None):
    """Reports progress until its parent is gone, then should stop by itself."""
    import time

    for k in range(600):
        with open(path, "w") as f:
            f.write(str(k))
        progress("x", k, 600, None)
        time.sleep(0.05)


def test_a_worker_stops_when_its_parent_is_killed(tmp_path):
    """The row's process killed by a time limit (SIGKILL, no clean-up): its worker ends at
    its next progress report instead of training on."""
    import subprocess
    import sys
    import time

    tick = tmp_path / "tick"
    script = ("import sys, test_agreement_workers as t\n"
              "from minimal_attn.backends.snell.workers import run_jobs\n"
              f"run_jobs({{'o': (t._orphan, ({str(tick)!r},), 1)}}, 2)\n")
    parent = subprocess.Popen([sys.executable, "-c", script],
                              cwd=os.path.dirname(__file__))
    deadline = time.monotonic() + 60
    while not tick.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tick.exists(), "the worker never started"
    parent.kill()
    parent.wait()
    time.sleep(1.0)
    seen = tick.read_text()
    time.sleep(1.0)
    assert tick.read_text() == seen, "the worker kept running after its parent was killed"


def test_threads_are_the_rows_and_shared_out_among_the_workers(tmp_path, shared_data,
                                                               torch_one_thread, monkeypatch):
    """threads=4 with 2 workers: torch has 4 in this process, each worker child 2."""
    import torch

    from minimal_attn.backends.snell import agreement

    heard = {}

    def jobs_seen(jobs, workers, task=None, progress=None, log=None, threads=1, label=""):
        heard.update(workers=workers, threads=threads, here=torch.get_num_threads())
        raise InputError("stop here")
    monkeypatch.setattr(agreement, "run_jobs", jobs_seen)
    c = AgreementConfig(dataset="sst2", data_dir=str(shared_data / "sst2"), workers=2,
                        threads=4, **TINY)
    with pytest.raises(InputError, match="stop here"):
        run_agreement(c, str(tmp_path / "o"))
    assert heard == {"workers": 2, "threads": 2, "here": 4}
    assert not (tmp_path / "o").exists()                  # a refusal leaves nothing
    with pytest.raises(InputError, match="threads must be an integer >= 1"):
        run_agreement(AgreementConfig(dataset="sst2", data_dir=str(shared_data / "sst2"),
                                      threads=0, **TINY), str(tmp_path / "o"))


def test_a_worker_whose_parent_is_gone_before_it_starts_stops_at_once():
    """The parent's pid comes from the parent: a worker whose parent was killed while it
    imported torch (it is then init's child) must not start its job."""
    import multiprocessing

    from minimal_attn.backends.snell.workers import _child

    ctx = multiprocessing.get_context("spawn")
    for parent, alive in ((os.getpid(), True), (os.getpid() + 10**6, False)):
        inbox = ctx.Queue()
        # the job (os.makedirs with keywords it refuses) fails at once if it starts
        proc = ctx.Process(target=_child, args=(os.makedirs, ("x",), "job", 1, inbox, parent))
        proc.start()
        proc.join(120)
        if alive:
            assert inbox.get(timeout=30)[:2] == ("error", "job")
        else:
            assert proc.exitcode == 1 and inbox.empty()
