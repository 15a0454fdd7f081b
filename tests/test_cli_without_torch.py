"""Without torch, a command that needs it ends in one line naming the install, exit 2.

torch is hidden from a child process by a finder that refuses every ``torch`` module, as
a machine without it would (``ModuleNotFoundError``); the numpy-only commands still run.
"""

import subprocess
import sys

import pytest

HIDE_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTorch())
sys.argv = ["attn-dyn"] + sys.argv[1:]
from minimal_attn.cli.main import main
main()
"""


def run_without_torch(args, cwd):
    return subprocess.run([sys.executable, "-c", HIDE_TORCH, *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("args", [
    ["synthetic", "copy", "--seeds", "1", "--steps", "5", "--out", "out"],
    ["train-seq", "--task", "classify", "--dataset", "sst2", "--data-dir", ".", "--out", "out"],
    ["agreement", "--task", "classify", "--dataset", "sst2", "--data-dir", ".", "--out", "out"],
    ["cells", "run", "tiny-t1-synthetic-sa", "--results", "out", "--work", "out"],
    ["train", "--dataset", "synthetic", "--epochs", "1", "--out", "out"],
], ids=lambda a: a[0])
def test_a_command_that_needs_torch_says_how_to_install_it(args, tmp_path):
    out = run_without_torch(args, tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), out.stderr
    assert "torch==2.13.0" in lines[0] and "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists()


def test_numpy_commands_run_without_torch(tmp_path):
    out = run_without_torch(["ode", "--m", "3", "--classes", "2", "--t-max", "5",
                             "--out", "out"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out").is_dir()
