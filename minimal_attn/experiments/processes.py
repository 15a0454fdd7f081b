"""Whether a process that wrote a file is still alive: one rule for every kind of leftover.

Two things outlive a writer killed without clean-up (SIGKILL, the OOM killer): a sweep
cell's claim (:mod:`~minimal_attn.experiments.sweep_claim`) and the temporary files of
an atomic write (:mod:`~minimal_attn.experiments.io`). Both name their writer by host
and pid, and both ask :func:`process_alive` before they take over or remove what it
left. A pid alone says nothing about a process on another machine, and a pid can be
reused, so the answer has three values and the start time guards against reuse.
"""

import os
import socket


def start_time(pid):
    """When process ``pid`` started (clock ticks since boot; /proc/PID/stat field 22), and
    whether it has ended but is not yet reaped (a zombie); ``(None, False)`` where /proc
    cannot tell (no such process, or no /proc)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            fields = f.read().rpartition(")")[2].split()     # after "PID (COMMAND)"
        return int(fields[19]), fields[0] in ("Z", "X")
    except (OSError, ValueError, IndexError):
        return None, False


def process_alive(host, pid, start=None):
    """True (alive), False (ended) or None (nobody here can tell: another host's, or a
    system without POSIX signals) for the process ``pid`` on ``host`` that started at
    ``start`` (:func:`start_time`; None: unchecked). A zombie has ended."""
    if host != socket.gethostname() or os.name != "posix":
        return None              # on Windows os.kill(pid, 0) would send a Ctrl-C
    try:
        os.kill(int(pid), 0)                 # signal 0: does it exist?
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                                 # another user's process: it exists
    except (OSError, ValueError, TypeError, OverflowError):
        return None
    now, zombie = start_time(pid)
    # a pid reused by a process started later is not the writer's
    return not zombie and (start is None or now is None or now == start)


def this_process():
    """This process as a writer: host, pid and start time."""
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "start": start_time(os.getpid())[0]}
