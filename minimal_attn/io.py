"""Atomic result files: a reader never sees a half-written CSV, JSON or PNG.

Everything is first written to a temporary file in the target folder and then
moved into place with :func:`os.replace`, which is atomic on POSIX and Windows.
"""

import contextlib
import csv
import json
import os
import tempfile

from .errors import InputError


def ensure_dir(path):
    """Create ``path`` (and parents) or raise InputError if it cannot be written."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output folder {path}: {exc.strerror}; "
                         "choose a writable --out") from None
    if not os.access(path, os.W_OK):
        raise InputError(f"output folder {path} is not writable; choose a writable --out")
    return path


@contextlib.contextmanager
def atomic_open(path, mode="w", **kwargs):
    """Open a temporary sibling of ``path``; on success move it onto ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)      # mkstemp makes 0600; results are ordinary files
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path, obj):
    with atomic_open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_csv(path, header, rows):
    with atomic_open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_text(path, text):
    with atomic_open(path, "w") as f:
        f.write(text)


def save_figure(fig, path, **kwargs):
    """Save a matplotlib figure atomically (format from ``path``'s extension)."""
    fmt = os.path.splitext(path)[1].lstrip(".") or "png"
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=fmt, **kwargs)
