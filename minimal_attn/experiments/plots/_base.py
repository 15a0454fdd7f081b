"""matplotlib without a display, imported only when a figure is drawn; the formats a
figure may be written in."""

import os

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import check_output_file

#: The formats a figure is written in, by the extension of its path.
FORMATS = ("png", "pdf", "svg")


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(path, param="out"):
    """Refuse, before any work, a figure path whose extension is not one of
    :data:`FORMATS` (matplotlib would refuse it only after the figure is drawn) or
    that cannot be written (:func:`.io.check_output_file`); create nothing."""
    ext = os.path.splitext(path)[1].lower()
    if ext.lstrip(".") not in FORMATS:
        given = f"the extension {ext!r}" if ext else "no extension"
        raise InputError(f"{param} {path!r} has {given}: a figure is written as "
                         + ", ".join("." + f for f in FORMATS[:-1]) + f" or .{FORMATS[-1]}; "
                         f"give {param} one of those", param=param)
    return check_output_file(path, param)
