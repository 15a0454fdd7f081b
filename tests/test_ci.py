"""The README's two commands: CI runs exactly the test command the README gives."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line for block in _bash_blocks(readme) for line in block.splitlines()
                if "pip install" in line and "pytest" in line]
    assert len(commands) == 1, commands                    # one test command, no variants
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "export CI=true" in ci
    assert [line for line in ci.splitlines() if line.strip() == commands[0].strip()]
    # torch pinned to its CPU build; the test extra brings the workers that -n needs
    assert "torch==2.13.0" in commands[0] and "-n auto" in commands[0]
    assert "pytest-xdist" in (ROOT / "setup.cfg").read_text(encoding="utf-8")
