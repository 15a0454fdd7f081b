"""``minimal_attn.backends`` and ``minimal_attn.cli`` when the package is read from a checkout.

``pip install .`` copies ``backends/`` and ``cli/`` (top-level folders of the repository) into
the installed package (``setup.cfg``, ``package_dir``). Python run from the repository's root
finds the checkout's ``minimal_attn/`` first, which holds neither, so ``import
minimal_attn.backends`` would fail there although the same line works anywhere else. This
finder maps the two names onto the folders beside the checkout's package; an installed
package (which has them inside) and an editable install (whose own finder maps them) never
reach it.
"""

import importlib.abc
import importlib.util
import os
import sys

SUBPACKAGES = ("backends", "cli")


class CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``<package>.backends`` and ``<package>.cli`` in the folders beside ``package_dir``."""

    def __init__(self, package, package_dir):
        root = os.path.dirname(package_dir)
        self.folders = {f"{package}.{name}": os.path.join(root, name) for name in SUBPACKAGES}

    def find_spec(self, fullname, path=None, target=None):
        folder = self.folders.get(fullname)
        if folder is None or not os.path.isfile(os.path.join(folder, "__init__.py")):
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])


def install(package, package_dir):
    """Add a :class:`CheckoutFinder` (last, once) when ``package_dir`` lacks the subpackages
    but its parent folder has them: a source checkout."""
    root = os.path.dirname(package_dir)
    inside = any(os.path.isdir(os.path.join(package_dir, n)) for n in SUBPACKAGES)
    beside = all(os.path.isfile(os.path.join(root, n, "__init__.py")) for n in SUBPACKAGES)
    if inside or not beside or any(isinstance(f, CheckoutFinder) for f in sys.meta_path):
        return
    sys.meta_path.append(CheckoutFinder(package, package_dir))
