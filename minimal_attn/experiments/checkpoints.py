r"""Files a command writes and reads back: checkpoints, histories, caches, behind one guard.

Every file an ``attn-dyn`` command reads again (a checkpoint to resume from, a
run's history or evaluation arrays, a cached proxy or head pool) is read with
:func:`load_guarded`. Whatever is wrong with it (random bytes, a truncated
file, another command's or another version's checkpoint, a configuration that
differs from the run's) ends in one :class:`~minimal_attn.errors.InputError`
line naming the file and the fix, never a traceback; where the writer keeps
the previous version (``.prev``) an unreadable file falls back to it with a
one-line warning, and is set aside as ``.damaged``: the next save then finds no
file to rotate, so the good ``.prev`` is not replaced by the damaged one.

One checkpoint format serves every trainer (V&R's FCAMs, Snell's LSTMs and
seed-batched synthetic models): a dict opening on :func:`checkpoint_header`
(``format`` and ``kind``, so one command never mistakes another's file for its
own; ``config``, the settings a resume must share; ``data``, the
:func:`data_fingerprint` of the training data), then the trainer's state.
:func:`write_checkpoint` writes it atomically, the old file becoming ``.prev``;
:func:`read_checkpoint` reads it back through :func:`load_guarded` and
refuses one of other settings or data in one line naming each difference.
"""

import contextlib
import hashlib
import json
import os

import numpy as np

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import atomic_open, ensure_dir

PREV, DAMAGED = ".prev", ".damaged"


def write_checkpoint(path, write, param="out"):
    """Write ``write(file)`` atomically at ``path``; the old file becomes ``path.prev``.

    ``path`` holds a complete checkpoint at every moment after the first write: the old
    one is linked to ``.prev`` while it stays in place, and the new one then replaces it,
    so a process killed (or asked where its checkpoint is) in between finds one there.
    A file system without hard links gets a move instead, and that short gap back.
    """
    ensure_dir(os.path.dirname(os.path.abspath(path)), param)
    with atomic_open(path + ".new", "wb", param=param) as f:
        write(f)
    if os.path.exists(path):
        linked = path + PREV + ".new"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(linked)                  # left by a writer killed here before
            os.link(path, linked)
            os.replace(linked, path + PREV)
        except OSError:
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
                 prev=True, log=None, aside=True):
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
    aside : then also rename ``path`` to ``path.damaged`` (replacing an older one), so the
        writer's next save keeps ``path.prev``; False for a read that only checks (the
        read that resumes sets it aside, and warns)
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
        if bad:
            kept = ""
            if aside and os.path.exists(path):
                with contextlib.suppress(OSError):          # a read-only folder: left there
                    os.replace(path, path + DAMAGED)
                    kept = f" (the damaged file is kept as {path}{DAMAGED})"
            if log is not None:
                log(f"warning: {what} {bad[0]} is unreadable; using {candidate}{kept}")
        return obj
    if bad:
        usable = f" and no usable {path}{PREV} exists" if prev else ""
        raise InputError(f"{what} {bad[0]} cannot be read{usable}: {fix}")
    return None


def checkpoint_header(fmt, kind, settings, data=None):
    """The keys every checkpoint starts with; the trainer adds its state beside them."""
    return {"format": fmt, "kind": kind, "config": settings, "data": data}


def differences(saved, now, defaults=None):
    """``name=saved (now value)`` for each setting that differs; long values by name only.

    ``defaults``: the value of a setting that one side leaves out (settings added
    after a checkpoint format was fixed are stored only when not at their default).
    """
    defaults, out = defaults or {}, []
    for key in dict.fromkeys([*saved, *now]):
        before, after = saved.get(key, defaults.get(key)), now.get(key, defaults.get(key))
        if before != after:
            text = f"{key}={before!r} (now {after!r})"
            out.append(text if len(text) <= 60 else key)
    return out


def read_checkpoint(path, read, fmt, kind, settings=None, data=None, defaults=None,
                    header=None, instead="use another --out", log=None, param=None,
                    aside=True):
    """The checkpoint at ``path`` as ``read`` returns it (or its ``.prev`` when ``path`` is
    unreadable, with a line to ``log``); None when neither exists.

    Parameters
    ----------
    read : path -> object (``torch_backend.read_torch``, an ``np.load`` reader, ...)
    fmt, kind : the expected ``format`` and ``kind``; another is unreadable
    settings : dict the checkpoint's ``config`` must equal (None: any settings)
    data : :func:`data_fingerprint` the checkpoint's ``data`` must equal (None: unchecked)
    defaults : settings that either side may leave out at these values (:func:`differences`)
    header : object -> the dict holding the :func:`checkpoint_header` keys (default: the
        object itself; the FCAM trainers read a ``(meta, payload)`` pair)
    instead : what else the user can do, in messages ("use another --out", "drop --resume")
    param : the option named by a settings refusal
    aside : set an unreadable ``path`` aside as ``.damaged`` on falling back (:func:`load_guarded`)
    """
    header = header or (lambda obj: obj)

    def same_run(obj, candidate):
        saved = header(obj)
        diff = differences(saved.get("config") or {}, settings, defaults)
        if data is not None and saved.get("data") != data:
            diff.append("data (another data set)")
        if diff:
            raise InputError(f"checkpoint {candidate} was written with different settings "
                             f"({'; '.join(diff)}); use the same options or {instead}",
                             param=param)

    return load_guarded(path, read, lambda obj: check_format(header(obj), fmt, kind),
                        None if settings is None else same_run,
                        fix=f"delete it (the run starts again) or {instead}", log=log,
                        aside=aside)


def data_fingerprint(*parts):
    """A short hash (SHA-1, hex) of a run's data, stored in its checkpoints.

    Each part is hashed in turn: a set of mosaics (V&R; anything with ``X``, ``y``,
    ``z``) by its shape and dtype, labels, foreground positions and every
    (N // 16)-th instance; a text task (Snell; a
    :class:`~minimal_attn.datasets.seq.TextTask`) by its kind, vocabulary, sizes
    and every token id; a NumPy array by its bytes; anything else by its ``repr``.
    """
    h = hashlib.sha1()
    for part in parts:
        for piece in _pieces(part):
            h.update(piece)
    return h.hexdigest()


_FILE_HASHES = {}       # (real path, size, mtime) -> SHA-1: one reading per version of a file


def file_hash(path):
    """The SHA-1 (hex) of a file's bytes, read once per version of the file (OSError when
    it cannot be read): what a model was given, named by content, not by its path."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha1()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


def hashed_rows(n):
    """The instances of a set of ``n`` mosaics that :func:`data_fingerprint` hashes: a
    slice, every (n // 16)-th (a sweep's rerun gathers only these, ``sweep_data``)."""
    return slice(None, None, max(1, n // 16))


def _pieces(part):
    """The byte strings :func:`data_fingerprint` hashes for one part."""
    if all(hasattr(part, key) for key in ("X", "y", "z")):
        X = np.asarray(part.X)                                   # (N, m, ...)
        yield repr((X.shape, str(X.dtype))).encode()
        for array in (part.y, part.z, X[hashed_rows(X.shape[0])]):
            yield np.ascontiguousarray(array).tobytes()
    elif hasattr(part, "train_src"):
        yield repr((part.task, part.n_vocab, len(part.train_src), len(part.val_src))).encode()
        for seqs in (part.train_src, part.train_tgt, part.val_src, part.val_tgt):
            yield np.concatenate(seqs).astype(np.int64).tobytes()
    elif isinstance(part, np.ndarray):
        yield np.ascontiguousarray(part).tobytes()
    else:
        yield repr(part).encode()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
