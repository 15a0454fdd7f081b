"""Where the examples find ``../shared/data`` (also when opened as notebooks).

The library never needs this path: its loaders take a folder argument. The
examples look for ``shared/data/<name>`` beside the checkout or any folder above
it, and ``$ATTN_DYN_DATA/<name>`` first when that variable is set.
"""

import os
from pathlib import Path


def shared_data(name):
    """The folder ``shared/data/<name>``, or None when it is nowhere to be found."""
    if os.environ.get("ATTN_DYN_DATA"):
        folder = Path(os.environ["ATTN_DYN_DATA"]) / name
        return folder if folder.is_dir() else None
    here = Path(__file__).resolve().parent
    for root in (here, *here.parents):
        folder = root / "shared" / "data" / name
        if folder.is_dir():
            return folder
    return None
