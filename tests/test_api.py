"""The curated API, the notation table and the import rules of the core."""

import re
import subprocess
import sys
from pathlib import Path

import minimal_attn
from minimal_attn import notation

CORE = Path(minimal_attn.__file__).parent


def test_every_public_name_resolves_and_internals_are_private():
    for name in minimal_attn.__all__:
        assert getattr(minimal_attn, name) is not None, name
    assert not [n for n in minimal_attn.__all__ if n.startswith("_") and n != "__version__"]


def test_every_vr_equation_is_tagged_in_the_core():
    text = "\n".join(p.read_text() for p in CORE.glob("*.py"))
    found = {int(n) for n in re.findall(r"V&R Eq\. \((\d+)\)", text)}
    assert set(range(1, 13)) <= found
    assert {16, 17, 18, 19} <= {int(n) for n in re.findall(r"Snell Eq\. \((\d+)\)", text)}


def test_notation_names_point_at_existing_code():
    # every function/module named in the "where" column exists
    import importlib
    for row in notation.TABLE:
        for ref in re.split(r"[;,] ?", row.where):
            parts = ref.strip().split(".")
            # the longest importable module, then attributes (datasets.text; fcam.forward)
            for k in range(len(parts), 0, -1):
                try:
                    mod = importlib.import_module("minimal_attn." + ".".join(parts[:k]))
                except ModuleNotFoundError:
                    continue
                for attr in parts[k:]:
                    assert hasattr(mod, attr), (row, ref)
                    mod = getattr(mod, attr)
                break
            else:
                raise AssertionError(f"{ref!r} names no module of minimal_attn ({row})")
    assert notation.lookup("V&R Eq. (10)")


def test_core_imports_neither_torch_nor_cli():
    code = ("import sys, minimal_attn, minimal_attn.losses, minimal_attn.fcam, minimal_attn.ode,"
            " minimal_attn.fixed_focus, minimal_attn.ibm1, minimal_attn.proxy,"
            " minimal_attn.agreement, minimal_attn.dynamics;"
            " bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'click', 'cupy')"
            " or m.startswith(('minimal_attn.cli', 'minimal_attn.backends'))];"
            " print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
