r"""Files a command writes and reads back: checkpoints, histories, caches, behind one guard.

Every file an ``attn-dyn`` command reads again (a checkpoint to resume from, a
run's history or evaluation arrays, a cached proxy or head pool) is read with
:func:`load_guarded`. Whatever is wrong with it (random bytes, a truncated
file, another command's or another version's checkpoint, a configuration that
differs from the run's) ends in one :class:`~minimal_attn.errors.InputError`
line naming the file and the fix, never a traceback; where the writer keeps
the previous version (``.prev``) an unreadable file falls back to it with a
one-line warning.

:func:`write_checkpoint` is that writer: the new file appears atomically and
the old one becomes ``.prev``. Checkpoints carry ``format`` and ``kind``
(:func:`check_format`), so one command never mistakes another's file for its own.
"""

import json
import os

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import atomic_open, ensure_dir

PREV = ".prev"


def write_checkpoint(path, write, param="out"):
    """Write ``write(file)`` atomically at ``path``; the old file becomes ``path.prev``."""
    ensure_dir(os.path.dirname(os.path.abspath(path)), param)
    with atomic_open(path + ".new", "wb", param=param) as f:
        write(f)
    if os.path.exists(path):
        os.replace(path, path + PREV)
    os.replace(path + ".new", path)


def check_format(obj, fmt, kind):
    """None if ``obj`` is a dict with ``format == fmt`` and ``kind == kind``, else the reason."""
    if not isinstance(obj, dict) or "format" not in obj:
        return "not an attn-dyn checkpoint"
    if obj.get("kind") != kind:
        return f"a {obj.get('kind') or 'foreign'} checkpoint, not {kind}"
    if obj["format"] != fmt:
        return f"format {obj['format']!r} of another version, not {fmt}"
    return None


def _why(exc):
    """A short reason for a read that failed (the exception's class, e.g. UnpicklingError)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at line {exc.lineno}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return type(exc).__name__


def load_guarded(path, read, check=None, settings=None, what="checkpoint", fix="delete it",
                 prev=True, log=None):
    """The content of ``path`` as ``read(path)`` returns it; None when no such file exists.

    Parameters
    ----------
    read : path -> object; any exception means the file is unreadable
    check : object -> None, or the reason it is not this command's file (format,
        kind, keys); such a file counts as unreadable
    settings : optional ``settings(object, path)`` that raises InputError when a
        readable file was written with other settings (no fallback: the user's
        options disagree with the run, not the file with itself)
    what, fix : the file's name in messages, and what the user should do
    prev : also try ``path.prev`` (the previous version kept by :func:`write_checkpoint`)
    log : receives the warning when ``path`` is unreadable and ``path.prev`` is used
    """
    bad = []
    for candidate in (path, path + PREV) if prev else (path,):
        if not os.path.exists(candidate):
            continue
        try:
            obj = read(candidate)
            reason = check(obj) if check is not None else None
        except Exception as exc:            # noqa: BLE001 (random bytes, truncated, foreign)
            reason = _why(exc)
        if reason:
            bad.append(f"{candidate} ({reason})")
            continue
        if settings is not None:
            settings(obj, candidate)
        if bad and log is not None:
            log(f"warning: {what} {bad[0]} is unreadable; using {candidate}")
        return obj
    if bad:
        usable = f" and no usable {path}{PREV} exists" if prev else ""
        raise InputError(f"{what} {bad[0]} cannot be read{usable}: {fix}")
    return None


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
