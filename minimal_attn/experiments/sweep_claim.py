r"""One writer a cell: whether a sweep's job or process is alive, and the claim it puts on a cell.

Two jobs must never write one cell folder (its checkpoints, ``history.jsonl``, record):
their epochs would interleave and the record would be of neither. Two defences keep a
live job from being run twice:

* **The driver asks squeue before it gives a job up.** ``sacct`` may lag behind or be
  broken; a job that ``squeue`` lists (pending, running, completing) is alive whatever
  ``sacct`` says (:func:`job_alive`). The driver takes a job that ``sacct`` does not know
  for dead only once ``squeue``, asked, does not list it either; while ``squeue`` cannot
  answer (not installed, its controller unreachable) the job is waited for, since
  nothing says it ended.
* **A job claims each cell before it writes there** (:func:`claim`):
  ``OUT/cells/NAME/writer.json`` names the job (created exclusively, ``O_EXCL``). A job
  that finds the claim of another job that is alive, or whose life nobody can tell (or
  a claim it cannot read), refuses the cell in one line, without writing; the
  claim of a job that has ended (killed, its node lost) is taken over; a requeued job
  keeps its id, so finds its own claim. The claim goes when the cell ends
  (:func:`release`). This also stops two drivers started on one ``out`` (the same line
  run twice) from running a cell twice. Two jobs taking over the same ended claim in
  the same instant are not told apart (the driver's squeue check comes first).

The local engine and Ray claim too, in the name of the sweep's driver process (:data:`PROCESS`:
its host, pid and start time): without that, two drivers started on one ``out`` would
train the same cell at once and interleave its files. The claim of a driver alive on this
host stands, and one made on another host cannot be told alive or dead from here: both are
refused in one line naming the file to delete. That of a driver that has ended (or whose pid
a later process has reused: its start time differs) is taken over; a Ray driver clears such
claims itself before handing cells to workers on other nodes (:func:`clear_ended`). As the
claim names the driver, not a worker, Ray's retry of a task whose worker died finds its own
claim on any node. Whichever kind finds a claim asks the holder's kind whether it lives
(squeue for a Slurm job, this host's processes for a driver), so a local and a Slurm sweep
of one ``out`` keep out of each other's cells too.
"""

import contextlib
import json
import os
import socket
import subprocess
import time

from minimal_attn.experiments.processes import process_alive, this_process

#: The claim file in a cell's folder.
CLAIM = "writer.json"
#: The variable that holds the running job's id, by cluster kind.
JOB_ENV = {"slurm": "SLURM_JOB_ID", "local": "SUBMITIT_LOCAL_JOB_ID"}
#: The claim kind of the local engine and of Ray: the writer is a process, ``HOST:PID``.
PROCESS = "process"


def squeue_jobs(timeout=60):
    """The ids of this user's jobs that ``squeue`` lists, or None when it cannot answer.

    One call for every job (``-u`` this uid: listing a job id that Slurm has forgotten
    is no error there, so exit status 0 means an answer)."""
    try:
        done = subprocess.run(["squeue", "-h", "-o", "%i %A", "-u", str(os.getuid())],
                              capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return set(done.stdout.split()) if done.returncode == 0 else None


def local_job_alive(job_id):
    """submitit's local executor: a job runs while its process (pid = job id) lives."""
    try:
        with open(f"/proc/{int(job_id)}/cmdline", "rb") as f:
            return b"submitit" in f.read()
    except (OSError, ValueError):
        return False


def job_alive(job_id, cluster, squeue=squeue_jobs):
    """True (alive), False (ended) or None (nobody can tell: squeue does not answer);
    ``squeue``: :func:`squeue_jobs` or a caller's memo of it."""
    if cluster == "local":
        return local_job_alive(job_id)
    listed = squeue()
    return None if listed is None else str(job_id) in listed


def _me(cluster, writer=None):
    """This writer's id: the job's (None outside a job), or ``HOST:PID`` (:data:`PROCESS`:
    of ``writer``, the sweep's driver, else this process)."""
    if cluster == PROCESS:
        writer = writer or this_process()
        return f"{writer['host']}:{writer['pid']}"
    return os.environ.get(JOB_ENV.get(cluster, ""))


def _read(path):
    try:
        with open(path) as f:
            holder = json.load(f)
        return holder if isinstance(holder, dict) and "job_id" in holder else None
    except (OSError, ValueError):
        return None


def _is(holder, job_id, cluster):
    return str(holder.get("job_id")) == str(job_id) and holder.get("cluster") == cluster


def _held(holder, path, cluster):
    """Why ``holder``'s claim at ``path`` stands, in a line; None when its writer ended
    (``cluster``: the kind of a claim that names none)."""
    kind = holder.get("cluster", cluster)
    if kind == PROCESS:
        host, pid = holder.get("host"), holder.get("pid")
        alive = process_alive(host, pid, holder.get("start"))
        if alive is False:
            return None
        state = "is alive" if alive else (f"may be alive (on another host: {socket.gethostname()}"
                                          " cannot tell)")
        return (f"process {pid} on {host} {state} and writes this cell ({path}): not run "
                "twice; delete that file if no process runs the cell")
    alive = job_alive(holder["job_id"], kind)
    if alive is False:
        return None
    state = "is alive" if alive else "may be alive (squeue does not answer)"
    return (f"job {holder['job_id']} {state} and writes this cell ({path}): not run twice; "
            "delete that file if no job runs the cell")


def claim(folder, cluster, writer=None):
    """Claim cell ``folder`` for the job running this (``cluster`` :data:`PROCESS`: for
    ``writer``, the driver process, this process by default): None when held, or
    outside a job; else a line saying which writer holds it, and why it is left to it."""
    me = _me(cluster, writer)
    if not me:
        return None                      # not in a job: nothing to name
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, CLAIM)
    who = (writer or this_process()) if cluster == PROCESS else \
        {"host": socket.gethostname(), "pid": os.getpid()}
    text = json.dumps({"job_id": me, "cluster": cluster, **who, "since": time.time()})
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _read(path)
        else:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            return None
        if holder is None:               # being written this instant, or damaged
            return (f"another writer's claim {path} cannot be read: not run twice; delete "
                    "it if no job or process runs the cell")
        if _is(holder, me, cluster):
            return None                  # a requeued job (or this process): its own claim
        held = _held(holder, path, cluster)
        if held:
            return held
        with contextlib.suppress(FileNotFoundError):   # ended: its claim is taken over
            os.unlink(path)
    return f"the claim {path} keeps changing hands: not run twice"


def release(folder, cluster, writer=None):
    """Remove this writer's claim on cell ``folder`` (another's stays)."""
    me = _me(cluster, writer)
    path = os.path.join(folder, CLAIM)
    holder = _read(path)
    if me and holder is not None and _is(holder, me, cluster):
        os.unlink(path)


def clear_ended(folder):
    """Remove the :data:`PROCESS` claim on cell ``folder`` of a process that has ended on
    this host; True if one went. A Ray driver calls it before it hands the cell to a worker
    on another node, which could not tell that process dead."""
    path = os.path.join(folder, CLAIM)
    holder = _read(path)
    if holder is None or holder.get("cluster") != PROCESS or _held(holder, path, PROCESS):
        return False                          # none, a job's, or a driver that may be alive
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return True
