r"""Where a sweep's cells run: in this process, as Ray tasks, or as Slurm jobs (submitit).

Each engine starts batches of tasks (:func:`minimal_attn.experiments.sweep_cell.run_tasks`:
one cell each, or ``cells_per_job`` cells one after another) and hands back
the outcomes of those that ended:

* :class:`LocalEngine`: one cell after another in this process (no dependency);
* :class:`RayEngine`: one Ray task a cell, with the CPUs and GPUs a cell asks
  for; ``ray.init()`` joins the cluster at ``address`` or starts a local Ray.
  Ray itself retries a task whose worker died (``max_retries``);
* :class:`SlurmEngine`: one submitit job a cell on Slurm (partition, time,
  GPUs, account), or submitit's local executor (``cluster="local"``); a job
  that died is resubmitted by the driver, and a pre-empted or timed-out one is
  requeued by submitit itself (:mod:`minimal_attn.experiments._sweep_slurm`). Each cell's
  ``job.json`` names its job, so that a driver started after one that was
  killed waits for the jobs still running instead of submitting their cells
  again (:meth:`SlurmEngine.reattach`); a job that has ended, or that ``sacct`` does
  not know, is not waited for: its cells (none with a valid record) are submitted again.

Ray and submitit are optional extras, imported only when their engine is
chosen; without them the engine refuses in one line naming the extra.
A handle is ``(engine's job, [tasks])``; an outcome is the task's own dict, or
``{"ok": False, "died": True, ...}`` when the process running it ended without one.
"""

import json
import math
import numbers
import os
import time

from minimal_attn.errors import InputError, check_int_at_least
from minimal_attn.experiments.io import write_json
from minimal_attn.experiments.sweep_cell import run_tasks

ENGINES = ("local", "ray", "slurm")
#: Seconds a Slurm job may stay unknown to ``sacct`` after its submission before the
#: driver takes it for dead (a job id of another cluster, or accounting purged); sacct
#: lists a job as soon as it is queued, so this only covers a slow accounting daemon.
UNKNOWN_GRACE = 300


def _need(module, extra):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"--engine {extra} needs {module}: pip install \".[{extra}]\" "
                         f"(or pip install {module})", param="engine") from None


def _died(tasks, why):
    return [{"cell": t["cell"].name, "ok": False, "died": True, "error": why,
             "log": os.path.join(t["out"], "cells", t["cell"].name, "log.txt"),
             "seconds": None} for t in tasks]


class LocalEngine:
    """Cells one after another in this process; a death here is the driver's own."""

    name, parallel, resubmits, cells_per_job = "local", 1, False, 1

    def start(self, tasks):
        return None, tasks

    def finished(self, handles, timeout):
        handle = handles[0]
        return [(handle, run_tasks(handle[1]))]

    def close(self):
        pass


class RayEngine:
    """One Ray task a cell; ``address=None`` starts a local Ray of ``num_cpus`` CPUs."""

    name, resubmits = "ray", False

    def __init__(self, address=None, num_cpus=None, cpus_per_cell=1, gpus_per_cell=0,
                 retries=2, max_running=None, cells_per_job=1):
        ray = self.ray = _need("ray", "ray")
        self.started = not ray.is_initialized()
        if self.started:
            try:
                ray.init(address=address, num_cpus=None if address else num_cpus,
                         include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR")
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InputError(f"cannot start or join Ray at {address or 'local'}: "
                                 + " ".join(str(exc).split())[:300], param="address") from None
        try:
            self._check_fits(address, cpus_per_cell, gpus_per_cell)
        except InputError:
            self.close()
            raise
        self.remote = ray.remote(num_cpus=cpus_per_cell, num_gpus=gpus_per_cell,
                                 max_retries=retries)(run_tasks)
        cpus = ray.cluster_resources().get("CPU", 1)
        self.parallel = max_running or max(1, int(cpus // max(cpus_per_cell, 1e-9)))
        self.cells_per_job = cells_per_job

    def _check_fits(self, address, cpus, gpus):
        """Refuse a cell that no node could ever run: Ray would wait for it forever."""
        nodes = [n.get("Resources") or {} for n in self.ray.nodes() if n.get("Alive")]
        if any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) >= gpus for r in nodes):
            return
        total = self.ray.cluster_resources()
        more_cpus = not address and all(r.get("CPU", 0) < cpus for r in nodes)
        raise InputError(
            f"a cell asks for {cpus:g} CPU(s) and {gpus:g} GPU(s), more than any node of "
            + (f"the Ray cluster at {address}" if address else "the local Ray") + " has ("
            f"{total.get('CPU', 0):g} CPUs and {total.get('GPU', 0):g} GPUs in all, on "
            f"{len(nodes)} node(s)): lower cpus_per_cell or gpus_per_cell"
            + (", or give the local Ray more CPUs with num_cpus" if more_cpus else ""),
            param=("cpus_per_cell", "gpus_per_cell", "num_cpus"))

    def start(self, tasks):
        return self.remote.remote(tasks), tasks

    def finished(self, handles, timeout):
        refs = {h[0]: h for h in handles}
        ready, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            try:
                out.append((refs[ref], self.ray.get(ref)))
            except self.ray.exceptions.RayError as exc:    # retries used up: worker died
                text = " ".join(str(exc).split())
                out.append((refs[ref], _died(refs[ref][1], f"{type(exc).__name__}: "
                                             f"{text[:200]}")))
        return out

    def close(self):
        if self.started:
            self.ray.shutdown()


class SlurmEngine:
    """One submitit job a cell (Slurm, or ``cluster="local"``: submitit's local executor)."""

    name, resubmits = "slurm", True

    def __init__(self, folder, cluster="slurm", partition=None, time_min=60, gpus_per_cell=0,
                 cpus_per_cell=1, account=None, max_running=None, cells_per_job=1):
        submitit = self.submitit = _need("submitit", "slurm")
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
        self.poll = 0.2 if self.local else 10.0
        self.parallel = max_running or (2 if self.local else 256)
        self.cells_per_job = cells_per_job

    def start(self, tasks):
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
        seconds since it was submitted; else None."""
        if self.local or job.state != "UNKNOWN":
            return None
        waited = time.time() - self.since.get(str(job.job_id), time.time())
        if waited < UNKNOWN_GRACE:
            return None
        return (f"is unknown to sacct {waited:.0f} s after its submission (a job of "
                "another cluster, or its accounting purged): taken as dead")

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
                        out.append((handle, _died(tasks, f"{type(exc).__name__}: "
                                                  f"{text[:200]} (job {job.job_id})")))
                elif why := self._unknown(job):      # else it would be waited for forever
                    out.append((handle, _died(tasks, f"job {job.job_id} {why}")))
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


def _check_resources(cpus, gpus, whole=False):
    """Before any engine starts: a cell's CPUs finite > 0 and GPUs finite >= 0, in Ray's
    steps of 0.0001 (Slurm: whole CPUs and GPUs)."""
    for key, value, positive in (("cpus_per_cell", cpus, True), ("gpus_per_cell", gpus, False)):
        bound = "> 0" if positive else ">= 0"
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
                not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise InputError(f"{key} must be a finite number {bound}, got {value}", param=key)
        if whole and int(value) != value:
            raise InputError(f"{key} must be a whole number {bound} for the slurm engine, got "
                             f"{value}", param=key)
        if 0 < value < 1e-4:
            raise InputError(f"{key} must be {'' if positive else '0 or '}at least 0.0001, got "
                             f"{value}", param=key)


def make_engine(name, out, address=None, num_cpus=None, cpus_per_cell=1, gpus_per_cell=0,
                retries=2, max_running=None, cells_per_job=1, cluster="slurm",
                partition=None, time_min=60, account=None):
    """The engine ``name`` with its options; refuses a missing extra before any work."""
    if name not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {name!r}",
                         param="engine")
    for key, value, low in (("retries", retries, 0), ("max_running", max_running, 1),
                            ("cells_per_job", cells_per_job, 1), ("time_min", time_min, 1),
                            ("num_cpus", num_cpus, 1)):
        if value is not None:
            check_int_at_least(key, value, low, param=key)
    _check_resources(cpus_per_cell, gpus_per_cell, whole=name == "slurm")
    if name == "local":
        return LocalEngine()
    if name == "ray":
        return RayEngine(address, num_cpus, cpus_per_cell, gpus_per_cell, retries,
                         max_running, cells_per_job)
    return SlurmEngine(os.path.join(os.path.abspath(out), "slurm"), cluster, partition,
                       time_min, gpus_per_cell, cpus_per_cell, account, max_running,
                       cells_per_job)
