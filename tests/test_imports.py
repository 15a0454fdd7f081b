"""The import directions of the house, for every module of the package.

Read from the source with ``ast`` (module-level imports only: what runs when the
module is imported; imports inside functions run only when a run asks for them):

* the core (``minimal_attn`` top level, ``datasets``, ``experiments``) imports no
  torch, click, ``minimal_attn.backends`` or ``minimal_attn.cli``;
* the textbook (``minimal_attn`` top level) imports no ``datasets`` or ``experiments``;
* ``backends/`` imports no click and no ``minimal_attn.cli``;
* nothing outside ``cli/`` imports click.

Then the same, transitively, in a fresh interpreter: importing every core module
loads no torch, click, backends or cli, and importing every command module loads
no torch (``attn-dyn --help`` imports them all).
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> package name (setup.cfg's package_dir)
FOLDERS = {"minimal_attn": "minimal_attn", "backends": "minimal_attn.backends",
           "cli": "minimal_attn.cli"}

#: Deliberate exceptions: (module, imported) -> why. Empty: there are none today.
ALLOWED = {}


def module_name(path):
    """``backends/vr/train.py`` -> ``minimal_attn.backends.vr.train``."""
    rel = path.relative_to(ROOT)
    parts = [FOLDERS[rel.parts[0]], *rel.parts[1:-1]]
    if rel.stem != "__init__":
        parts.append(rel.stem)
    return ".".join(parts)


def all_modules():
    """{module name: source path} of every .py file of the package."""
    return {module_name(p): p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))
            if "__pycache__" not in p.parts}


def module_level_imports(source, module, is_package=False):
    """The absolute names a module imports when it is imported (not inside functions).

    ``from X import y`` gives ``X`` and ``X.y`` (``y`` may be a submodule);
    relative imports are resolved against ``module``.
    """
    out = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue                         # runs only when called
            if isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = module.split(".") if is_package else module.split(".")[:-1]
                    package = package[:len(package) - node.level + 1]
                    base = ".".join(package + ([base] if base else []))
                out.add(base)
                out.update(f"{base}.{alias.name}" for alias in node.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                visit(getattr(node, field, []) or [])

    visit(ast.parse(source).body)
    return out


def _hits(imported, prefixes):
    return sorted(n for n in imported for p in prefixes if n == p or n.startswith(p + "."))


def _layer(module):
    parts = module.split(".")
    if parts[1:2] in (["backends"], ["cli"]):
        return parts[1]
    if parts[1:2] in (["datasets"], ["experiments"]):
        return "core"
    return "textbook"


FORBIDDEN = {
    "textbook": ("torch", "click", "minimal_attn.backends", "minimal_attn.cli",
                 "minimal_attn.datasets", "minimal_attn.experiments"),
    "core": ("torch", "click", "minimal_attn.backends", "minimal_attn.cli"),
    "backends": ("click", "minimal_attn.cli"),
    "cli": (),
}


def violations():
    found = []
    for name, path in all_modules().items():
        imported = module_level_imports(path.read_text(encoding="utf-8"), name,
                                        path.stem == "__init__")
        for bad in _hits(imported, FORBIDDEN[_layer(name)]):
            if (name, bad) not in ALLOWED:
                found.append(f"{name} imports {bad} ({_layer(name)})")
    return found


def test_every_module_is_covered():
    modules = all_modules()
    layers = {layer: [m for m in modules if _layer(m) == layer] for layer in FORBIDDEN}
    # every folder of the package is walked (a new module is checked without a list to edit)
    assert {"minimal_attn.losses", "minimal_attn.datasets.cifar",
            "minimal_attn.experiments.train_loop", "minimal_attn.backends.vr.train",
            "minimal_attn.backends.snell.train", "minimal_attn.cli.main"} <= set(modules)
    assert all(len(layers[layer]) >= 5 for layer in FORBIDDEN), {
        k: len(v) for k, v in layers.items()}
    assert len(modules) == len(list(ROOT.glob("minimal_attn/**/*.py"))) + len(
        list(ROOT.glob("backends/**/*.py"))) + len(list(ROOT.glob("cli/**/*.py")))


def test_imports_point_one_way():
    assert violations() == []


def test_the_reader_sees_module_level_imports_only():
    source = ("import numpy as np\nfrom . import losses\nfrom .vr import train as t\n"
              "try:\n    import click\nexcept ImportError:\n    pass\n"
              "if True:\n    from minimal_attn.backends import torch_backend\n"
              "class A:\n    import json\n"
              "def f():\n    import torch\n")
    got = module_level_imports(source, "minimal_attn.backends.x")
    assert {"numpy", "minimal_attn.backends.losses", "minimal_attn.backends.vr.train",
            "click", "minimal_attn.backends.torch_backend", "json"} <= got
    assert "torch" not in got
    assert module_level_imports("from .. import errors\n", "minimal_attn.experiments.io") >= {
        "minimal_attn.errors"}
    assert module_level_imports("from . import io\n", "minimal_attn.experiments",
                                is_package=True) >= {"minimal_attn.experiments.io"}
    # and a violation is reported: the rule is not vacuous
    assert _hits({"click", "minimal_attn.cli.options"}, FORBIDDEN["backends"]) == [
        "click", "minimal_attn.cli.options"]


#: optional packages a module may need (the sweep engines); absent, that module is passed over
OPTIONAL = ("ray", "submitit")


def _imported_after(modules, probe):
    code = ("import importlib, sys\n"
            f"for name in {sorted(modules)!r}:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except ModuleNotFoundError as exc:\n"
            f"        if exc.name not in {OPTIONAL!r}:\n            raise\n"
            f"print(sorted(m for m in sys.modules if {probe}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_the_core_loads_no_torch_click_backends_or_cli():
    core = [m for m in all_modules() if _layer(m) in ("textbook", "core")]
    probe = ("m.split('.')[0] in ('torch', 'click', 'cupy') or "
             "m.startswith(('minimal_attn.backends', 'minimal_attn.cli'))")
    assert _imported_after(core, probe) == "[]"


def test_importing_every_command_loads_no_torch():
    pytest.importorskip("torch")       # without torch the question does not arise
    commands = [m for m in all_modules() if _layer(m) == "cli"]
    assert _imported_after(commands, "m.split('.')[0] == 'torch'") == "[]"


#: Click options whose default is still written in cli/: (file, option) -> why.
LITERAL_DEFAULTS = {
    ("options.py", "--progress/--no-progress"): "a display switch of the CLI, no library setting",
}


def literal_defaults(source):
    """``[(option, value)]`` of every ``click.option(..., default=<literal>)`` in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "option":
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(default, ast.Constant) and default.value is not None:
                names = [a.value for a in node.args if isinstance(a, ast.Constant)]
                out.append((max(names, key=len) if names else "?", default.value))
    return out


def test_every_cli_default_comes_from_the_library():
    found = [(path.name, option) for path in sorted((ROOT / "cli").glob("*.py"))
             for option, _ in literal_defaults(path.read_text(encoding="utf-8"))]
    assert [f for f in found if f not in LITERAL_DEFAULTS] == []
    assert literal_defaults('click.option("--n", "-n", default=3)\n'
                            'click.option("--m", default=D.m)\n') == [("--n", 3)]


def test_a_checkout_run_from_its_root_finds_backends_and_cli():
    # after `pip install .`, Python started in the checkout reads its minimal_attn/, which
    # lacks backends/ and cli/; -S leaves out site-packages (and an editable install's
    # finder), so only the checkout can answer
    code = ("import importlib.util as u; "
            "print([u.find_spec(n).origin for n in ('minimal_attn.backends', 'minimal_attn.cli')])")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([str(ROOT / "backends" / "__init__.py"),
                                      str(ROOT / "cli" / "__init__.py")])


def test_an_installed_package_gets_no_checkout_finder(tmp_path, monkeypatch):
    from minimal_attn import _checkout

    for name in ("pkg/backends", "pkg/cli", "backends", "cli"):   # installed: inside pkg/
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "__init__.py").write_text("")
    monkeypatch.setattr(sys, "meta_path", [])
    _checkout.install("pkg", str(tmp_path / "pkg"))
    assert sys.meta_path == []
    for name in ("backends", "cli"):                               # a checkout: beside it
        (tmp_path / "pkg" / name / "__init__.py").unlink()
        (tmp_path / "pkg" / name).rmdir()
    _checkout.install("pkg", str(tmp_path / "pkg"))
    _checkout.install("pkg", str(tmp_path / "pkg"))                # once
    assert [type(f) for f in sys.meta_path] == [_checkout.CheckoutFinder]
    spec = sys.meta_path[0].find_spec("pkg.cli")
    assert spec.origin == str(tmp_path / "cli" / "__init__.py")
    assert sys.meta_path[0].find_spec("pkg.other") is None
