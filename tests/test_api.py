"""The curated API and the notation table (the import rules: tests/test_imports.py)."""

import re
from pathlib import Path

import pytest

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


def test_docs_core_md_holds_the_notation_table_as_generated():
    docs = CORE.parent / "docs" / "core.md"
    if not docs.exists():
        pytest.skip("minimal_attn is installed without the checkout's docs/")
    assert notation.as_markdown().rstrip("\n") in docs.read_text(), (
        "docs/core.md's notation table is stale: paste minimal_attn.notation.as_markdown()")


@pytest.mark.parametrize("page", ["README.md", "docs/core.md"])
def test_the_pages_python_snippets_run_as_written(page, tmp_path, monkeypatch):
    """The NumPy snippets a reader copies first (the README's ten lines, core.md's API)."""
    path = CORE.parent / page
    if not path.exists():
        pytest.skip(f"minimal_attn is installed without the checkout's {page}")
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    assert blocks, f"{page} has no python snippet"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, page, "exec"), {})
