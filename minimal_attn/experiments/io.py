"""Result files that are complete or absent: never half-written, checked before the work.

* :func:`check_output_dir` / :func:`check_output_file`: before any computing,
  refuse an output path that cannot be written (without creating anything);
* :func:`atomic_open` and the ``write_*`` helpers: a temporary sibling moved
  into place with :func:`os.replace` (atomic on POSIX and Windows); one that a
  killed writer left behind is removed by the next write into its folder;
* :func:`staged_folder`: a set of files that appears all together or not at
  all; the folder is created only when the files are ready to be written (a killed
  run's staging folder goes as the temporary files do);
* :func:`undo_on_refusal`: a run refused midway (it diverged, a file it reads
  back is bad) removes what it created, so ``out`` is as it was before.

Every failure to write becomes an :class:`~minimal_attn.errors.InputError`
naming the parameter (``out`` by default).
"""

import contextlib
import csv
import functools
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time

from minimal_attn.errors import InputError
from minimal_attn.experiments.processes import process_alive

#: A temporary sibling (or staging folder) older than this (seconds) is left over from a
#: writer that was killed (SIGKILL, the OOM killer, a power cut) and is removed by the next
#: write of the same file (staging in the same folder); no single write takes a fraction
#: of it, so a live writer's file is never hit. One whose name says it was written on this
#: machine by a process that has ended goes at once (:func:`_owner`), so a run resumed
#: right after a SIGKILL leaves none behind.
STALE_AFTER = 3600.0
_TMP_PREFIX, _STAGE_PREFIX = ".tmp-", ".staging-"
#: After the prefix: the writer (:func:`_owner`, absent in older names), 8 random characters.
_NAME = re.compile(r"(?:(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-)?[a-z0-9_]{8}")


@functools.lru_cache(maxsize=1)
def _host():
    """This machine in a temporary name, hashed: its hostname and, on Linux, its pid
    namespace (two containers that share a folder may share a hostname, not their pids)."""
    try:
        space = os.readlink("/proc/self/ns/pid")
    except OSError:
        space = ""
    return hashlib.sha1(f"{socket.gethostname()} {space}".encode()).hexdigest()[:8]


def _owner():
    """``<host>-<pid>-``, the writer in a temporary name: the host hashed, since a pid
    says nothing about a process on another machine writing into a shared folder."""
    return f"{_host()}-{os.getpid()}-"


def _ended(match):
    """True when a temporary name's writer ran here (:func:`_host`) and has ended
    (:func:`~minimal_attn.experiments.processes.process_alive`); a writer that may be
    alive, or one nobody can tell, keeps its file."""
    return (match["host"] == _host() and int(match["pid"]) != os.getpid()
            and process_alive(socket.gethostname(), match["pid"]) is False)


def _nearest_existing(path):
    """The deepest existing ancestor of ``path`` (``path`` itself if it exists)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _probe(folder, path, param):
    """Create and delete a temporary file in ``folder``: the only reliable writability test
    (``os.access`` says yes to root in /sys and /proc, where creating a file fails)."""
    if not os.path.isdir(folder):
        raise InputError(f"cannot write '{path}': '{folder}' is a file, not a folder; "
                         f"choose another {param}", param=param)
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"cannot write to '{path}': {exc.strerror or exc}; "
                         f"choose a writable {param}", param=param) from None


def check_output_dir(path, param="out"):
    """Refuse an output folder that cannot be created or written; create nothing."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"{param} '{path}' is a file; give a folder", param=param)
    _probe(_nearest_existing(path), path, param)
    return path


def _refuse_special(path, param):
    """Refuse an existing ``path`` that is not a plain file: the atomic rename would put a
    regular file in place of a device, a pipe or a link (the link, not its target)."""
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        kind = ("a folder" if os.path.isdir(path) and not os.path.islink(path)
                else "a link" if os.path.islink(path) else "a device, pipe or socket")
        raise InputError(f"{param} '{path}' is {kind}, not a plain file; give a file name "
                         "(a link: its target's path)", param=param)


def check_output_file(path, param="out", inputs=()):
    """Refuse an output file path that is a folder, a device, a pipe or a link, that is one
    of the files ``inputs`` (``(param, path)`` pairs: writing it would replace the data
    read), or that cannot be written; create nothing."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise InputError(f"{param} '{path}' is a folder; give a file name", param=param)
    for name, source in inputs:
        if source is not None and os.path.exists(path) and os.path.exists(source) and \
                os.path.samefile(path, source):
            raise InputError(f"{param} '{path}' is the input {name}: writing it would replace "
                             f"the data; give {param} another file name", param=(param, name))
    _refuse_special(path, param)
    _probe(_nearest_existing(os.path.dirname(os.path.abspath(path))), path, param)
    return path


def ensure_dir(path, param="out"):
    """Create ``path`` (and parents) or raise InputError if it cannot be written."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output folder '{path}': {exc.strerror or exc}; "
                         f"choose a writable {param}", param=param) from None
    _probe(path, path, param)
    return path


def check_new_run(out, resume, param=("out", "resume")):
    """Refuse a fresh run (``resume`` false) into a folder that holds another run's
    ``results.json`` or checkpoints: the new run would replace them one file at a time,
    so a failure or Ctrl-C half-way would leave a folder whose results describe one run
    and whose checkpoints another. The commands call it; a library call may start over
    on purpose (a sweep reruns a stale cell in its folder)."""
    if out is None or resume:
        return
    ckpts = os.path.join(out, "checkpoints")
    found = [name for name, present in (
        ("results.json", os.path.isfile(os.path.join(out, "results.json"))),
        ("checkpoints/", os.path.isdir(ckpts) and any(os.scandir(ckpts))))
        if present]
    if found:
        raise InputError(f"{out} already holds a run ({' and '.join(found)}): continue it "
                         "with --resume, or give another --out (or delete that folder)",
                         param=param)


@contextlib.contextmanager
def atomic_open(path, mode="w", param="out", **kwargs):
    """Open a temporary sibling of ``path``; on success move it onto ``path``.

    The parent folder is created here, at write time. An OSError (disk full,
    permissions changed since the check) becomes an InputError and leaves no
    temporary file behind.
    """
    _refuse_special(path, param)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX + _owner(),
                                   suffix=os.path.basename(path), dir=folder)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}; "
                         f"choose a writable {param}", param=param) from None
    _sweep_stale(folder, os.path.basename(tmp), suffix=os.path.basename(path))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)      # mkstemp makes 0600; results are ordinary files
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write {path}: {exc.strerror or exc}; "
                             f"choose a writable {param}", param=param) from None
        raise


def _sweep_stale(folder, keep, suffix="", prefix=_TMP_PREFIX, folders=False):
    """Remove what killed writers left in ``folder``, among the entries named as ours
    (``prefix``, :data:`_NAME`; files, or with ``folders`` staging folders) other than
    ``keep``: those of a writer that has ended on this machine, and those of the same
    file (``suffix``) older than :data:`STALE_AFTER`."""
    cutoff = time.time() - STALE_AFTER
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            match = _NAME.match(entry.name, len(prefix))
            if (entry.name == keep or not entry.name.startswith(prefix) or match is None
                    or not (entry.is_dir if folders else entry.is_file)(follow_symlinks=False)):
                continue
            ended = match["host"] is not None and _ended(match)
            old = (entry.name[match.end():] == suffix
                   and entry.stat(follow_symlinks=False).st_mtime < cutoff)
            if ended or old:
                if folders:
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


@contextlib.contextmanager
def staged_folder(path, param="out", replaces=()):
    """Yield a staging folder; on success move its files into ``path`` together.

    ``path`` is created only now (so a failed or interrupted run leaves no empty
    folder); on any failure the staged files are deleted and a folder created
    here is removed again. ``replaces``: glob patterns of the files of the set this one
    replaces (the same command's earlier output): those the new set does not overwrite
    are removed after it has moved in, so the folder never mixes two runs.
    """
    created = not os.path.isdir(path)
    ensure_dir(path, param)
    stage = None
    try:
        stage = tempfile.mkdtemp(prefix=_STAGE_PREFIX + _owner(), dir=path)
        _sweep_stale(path, os.path.basename(stage), prefix=_STAGE_PREFIX, folders=True)
        yield stage
        new = sorted(os.listdir(stage))
        for name in new:
            os.replace(os.path.join(stage, name), os.path.join(path, name))
        for pattern in replaces:
            for old in glob.glob(os.path.join(glob.escape(path), pattern)):
                if os.path.basename(old) not in new and os.path.isfile(old):
                    os.unlink(old)
    except BaseException as exc:
        if created:
            shutil.rmtree(path, ignore_errors=True)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write to {path}: {exc.strerror or exc}; "
                             f"choose a writable {param}", param=param) from None
        raise
    finally:
        if stage is not None and os.path.isdir(stage):
            shutil.rmtree(stage, ignore_errors=True)


def _tree(path):
    """Every path under ``path`` (and ``path`` itself), or an empty set if it does not exist."""
    if not os.path.lexists(path):
        return set()
    found = {os.path.abspath(path)}
    for root, dirs, files in os.walk(path):
        found.update(os.path.abspath(os.path.join(root, n)) for n in dirs + files)
    return found


@contextlib.contextmanager
def undo_on_refusal(path, keep=None):
    """On InputError inside the block, delete what it created under ``path`` (then re-raise).

    Files and folders that existed before are kept (a checkpoint the run
    resumed from and then advanced stays a valid checkpoint), and so is a new
    path for which ``keep(path)`` is true, with its folders (e.g. the
    checkpoints of runs that finished epochs before another run was refused).
    Ctrl-C keeps everything: the checkpoints are what a rerun continues from.
    """
    before = _tree(path) if path is not None else set()
    folders = {p: os.stat(p) for p in before if os.path.isdir(p) and not os.path.islink(p)}
    try:
        yield
    except InputError:
        if path is not None:
            new_paths = _tree(path) - before
            if keep is not None:
                kept = {p for p in new_paths if keep(p)}
                kept |= {os.path.dirname(p) for p in kept}       # their folders stay too
                new_paths -= kept
            for new in sorted(new_paths, key=len, reverse=True):  # children first
                with contextlib.suppress(OSError):
                    if os.path.isdir(new) and not os.path.islink(new):
                        os.rmdir(new)
                    else:
                        os.unlink(new)
            for folder, st in folders.items():     # their listings are as before: so the times
                with contextlib.suppress(OSError):
                    os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns))
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
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


def save_figure(fig, path, **kwargs):
    """Save a matplotlib figure atomically (format from ``path``'s extension)."""
    fmt = os.path.splitext(path)[1].lstrip(".") or "png"
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=fmt, **kwargs)
