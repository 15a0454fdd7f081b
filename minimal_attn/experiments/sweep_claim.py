r"""One writer a cell: whether a sweep's Slurm job is alive, and the claim a job puts on its cell.

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

Only Slurm jobs (and submitit's local executor, ``cluster="local"``, whose job id is the
pid) claim: Ray restarts a task only after its worker died, and the local engine is one
process.
"""

import contextlib
import json
import os
import socket
import subprocess
import time

#: The claim file in a cell's folder.
CLAIM = "writer.json"
#: The variable that holds the running job's id, by cluster kind.
JOB_ENV = {"slurm": "SLURM_JOB_ID", "local": "SUBMITIT_LOCAL_JOB_ID"}


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


def _read(path):
    try:
        with open(path) as f:
            holder = json.load(f)
        return holder if isinstance(holder, dict) and "job_id" in holder else None
    except (OSError, ValueError):
        return None


def _is(holder, job_id, cluster):
    return str(holder.get("job_id")) == str(job_id) and holder.get("cluster") == cluster


def claim(folder, cluster):
    """Claim cell ``folder`` for the job running this (None when held, or outside a job);
    else a few words saying which job holds it, and why it is left to that job."""
    me = os.environ.get(JOB_ENV.get(cluster, ""))
    if not me:
        return None                      # not in a job: nothing to name
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, CLAIM)
    text = json.dumps({"job_id": me, "cluster": cluster, "host": socket.gethostname(),
                       "pid": os.getpid(), "since": time.time()})
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
            return (f"another job's claim {path} cannot be read: not run twice; delete it "
                    "if no job runs the cell")
        if _is(holder, me, cluster):
            return None                  # a requeued job: its own claim
        alive = job_alive(holder["job_id"], holder.get("cluster", cluster))
        if alive is not False:
            state = "is alive" if alive else "may be alive (squeue does not answer)"
            return (f"job {holder['job_id']} {state} and writes this cell ({path}): not "
                    "run twice; delete that file if no job runs the cell")
        with contextlib.suppress(FileNotFoundError):   # ended: its claim is taken over
            os.unlink(path)
    return f"the claim {path} keeps changing hands: not run twice"


def release(folder, cluster):
    """Remove this job's claim on cell ``folder`` (another job's stays)."""
    me = os.environ.get(JOB_ENV.get(cluster, ""))
    path = os.path.join(folder, CLAIM)
    holder = _read(path)
    if me and holder is not None and _is(holder, me, cluster):
        os.unlink(path)
