r"""The Slurm engine of a sweep: one submitit job a cell, and the jobs of a killed driver.

:class:`SlurmEngine` submits one job a batch of cells (Slurm, or submitit's local
executor with ``cluster="local"``: each job a local process) and hands back the outcomes
of those that ended; a job that died is resubmitted by the driver, and a pre-empted or
timed-out one is requeued by submitit itself (:mod:`minimal_attn.experiments._sweep_slurm`).

Each cell's ``job.json`` names its job, so that a driver started after one that was
killed waits for the jobs still running instead of submitting their cells again
(:meth:`SlurmEngine.reattach`). A job that has ended is not waited for, nor one of the
other cluster kind, nor one that ``sacct`` has not known for :data:`UNKNOWN_GRACE` seconds
*and* that ``squeue``, asked, does not list: ``sacct`` may lag or be broken, and a job
``squeue`` lists is alive whatever ``sacct`` says; while ``squeue`` cannot answer, the job
is waited for (:mod:`minimal_attn.experiments.sweep_claim`, which also has the claim
each job puts on its cells, so that a second writer refuses). The cells of a job given
up (none with a valid record) are submitted again.
"""

import json
import os
import time

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import write_json
from minimal_attn.experiments.sweep_cell import died
from minimal_attn.experiments.sweep_claim import job_alive, squeue_jobs

#: Seconds a Slurm job may stay unknown to ``sacct`` after its submission before the
#: driver asks ``squeue`` whether it is alive (a job id of another cluster, or accounting
#: purged or lagging); sacct lists a job as soon as it is queued, so this only covers a
#: slow accounting daemon.
UNKNOWN_GRACE = 300


class SlurmEngine:
    """One submitit job a cell (Slurm, or ``cluster="local"``: submitit's local executor)."""

    name, resubmits = "slurm", True

    def __init__(self, folder, cluster="slurm", partition=None, time_min=60, gpus_per_cell=0,
                 cpus_per_cell=1, account=None, max_running=None, cells_per_job=1):
        from minimal_attn.experiments.sweep_engines import need

        submitit = self.submitit = need("submitit", "slurm")
        from minimal_attn.experiments import _sweep_slurm

        self.job = _sweep_slurm.CellJob
        try:
            self.executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
        except RuntimeError as exc:           # no srun here
            raise InputError(f"cannot submit to {cluster}: {exc} (--cluster local runs the "
                             "jobs on this machine)", param="cluster") from None
        params = dict(timeout_min=int(time_min), gpus_per_node=int(gpus_per_cell),
                      cpus_per_task=int(cpus_per_cell), name="attn-dyn-sweep")
        if cluster == "slurm":
            params.update({k: v for k, v in (("slurm_partition", partition),
                                             ("slurm_account", account)) if v})
        self.executor.update_parameters(**params)
        self.local, self.cluster = cluster == "local", cluster
        self.since = {}                      # job id -> when it was submitted (time.time)
        self.squeued = (-float("inf"), None)  # (when, squeue_jobs()): asked once a poll
        self.poll = 0.2 if self.local else 10.0
        self.parallel = max_running or (2 if self.local else 256)
        self.cells_per_job = cells_per_job

    def start(self, tasks):
        tasks = [dict(t, claim=self.cluster) for t in tasks]   # the job claims its cells
        job = self.executor.submit(self.job(), tasks)
        self.since[str(job.job_id)] = time.time()
        for t in tasks:
            write_json(_job_file(t), {"job_id": str(job.job_id), "cluster": self.cluster,
                                      "cells": [x["cell"].name for x in tasks]})
        return job, tasks

    def _job(self, job_id):
        from submitit.local.local import LocalJob
        from submitit.slurm.slurm import SlurmJob

        if self.local:
            return _OrphanJob(LocalJob(self.executor.folder, job_id))
        return SlurmJob(self.executor.folder, job_id)

    def reattach(self, waiting, log=None):
        """``(handles, rest)``: the jobs of ``waiting`` cells that a previous driver submitted
        and that still run, and the tasks still to submit.

        A ``waiting`` cell has no valid record, so a job of it that has ended (failed,
        or finished before the record was damaged) is not taken again: its stored outcome
        would replay an old failure, or report a record that is gone. Neither is a job
        of another cluster kind (``--cluster local`` resumed on Slurm) or one that sacct
        does not know; ``log(line)`` hears one line a job dropped."""
        log = log or (lambda line: None)
        by_name = {t["cell"].name: t for t in waiting}
        handles, taken, seen = [], set(), set()
        for task in waiting:
            path = _job_file(task)
            try:
                with open(path) as f:
                    info = json.load(f)
                job_id, since = str(info["job_id"]), os.path.getmtime(path)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if job_id in seen:
                continue
            seen.add(job_id)
            tasks = [by_name[n] for n in info.get("cells", []) if n in by_name
                     and n not in taken]
            why = self._gone(job_id, info.get("cluster", self.cluster), since)
            if why:
                log(f"job {job_id} of an earlier driver {why}: submitting "
                    f"{', '.join(t['cell'].name for t in tasks) or 'its cells'} again")
                continue
            taken.update(t["cell"].name for t in tasks)
            handles.append((self._job(job_id), tasks))
        return handles, [t for t in waiting if t["cell"].name not in taken]

    def _gone(self, job_id, cluster, since):
        """Why the job ``job_id`` (submitted at ``since`` to ``cluster``) is not worth
        waiting for, in a few words; None while it runs."""
        if cluster != self.cluster:
            return f"was submitted with --cluster {cluster}, not {self.cluster}"
        job = self._job(job_id)
        if job.done(force_check=True):
            return "has ended without a valid record of its cells"
        self.since[job_id] = since
        return self._unknown(job)

    def _unknown(self, job):
        """A few words when ``job`` has been unknown to sacct for :data:`UNKNOWN_GRACE`
        seconds since it was submitted and squeue, asked, does not list it; else None
        (squeue lists it, or cannot answer: it is waited for)."""
        if self.local or job.state != "UNKNOWN":
            return None
        waited = time.time() - self.since.get(str(job.job_id), time.time())
        if waited < UNKNOWN_GRACE or job_alive(job.job_id, "slurm", self._squeue) is not False:
            return None
        return (f"is unknown to sacct {waited:.0f} s after its submission and squeue does "
                "not list it (a job of another cluster, or its accounting purged): taken "
                "as dead")

    def _squeue(self):
        """:func:`.sweep_claim.squeue_jobs`, asked at most once a poll for every job."""
        when, listed = self.squeued
        if time.monotonic() - when >= self.poll:
            self.squeued = when, listed = time.monotonic(), squeue_jobs()
        return listed

    def finished(self, handles, timeout):
        deadline = time.monotonic() + (timeout or 0)
        while True:
            out = []
            for handle in handles:
                job, tasks = handle
                if job.done(force_check=self.local):
                    try:
                        out.append((handle, job.result()))
                    except Exception as exc:  # noqa: BLE001 (the job ended without a result)
                        text = " ".join(str(exc).split())
                        out.append((handle, died(tasks, f"{type(exc).__name__}: "
                                                  f"{text[:200]} (job {job.job_id})")))
                elif why := self._unknown(job):      # else it would be waited for forever
                    out.append((handle, died(tasks, f"job {job.job_id} {why}")))
            if out or (timeout is not None and time.monotonic() > deadline):
                return out
            time.sleep(self.poll)

    def close(self):
        pass


def _job_file(task):
    return os.path.join(task["out"], "cells", task["cell"].name, "job.json")


class _OrphanJob:
    """A local job whose driver died: running while its process (pid = job id) lives."""

    def __init__(self, job):
        self.job, self.job_id, self.paths = job, job.job_id, job.paths

    def done(self, force_check=False):
        if self.paths.result_pickle.exists():
            return True
        try:
            with open(f"/proc/{int(self.job_id)}/cmdline", "rb") as f:
                return b"submitit" not in f.read()
        except (OSError, ValueError):
            return True

    def result(self):
        return self.job.result()
