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
  requeued by submitit itself (:mod:`minimal_attn.experiments.sweep_slurm`, which has
  the details: reattaching to the jobs of a killed driver, ``sacct`` and ``squeue``).

Ray and submitit are optional extras, imported only when their engine is
chosen; without them the engine refuses in one line naming the extra.
A handle is ``(engine's job, [tasks])``; an outcome is the task's own dict, or
``{"ok": False, "died": True, ...}`` when the process running it ended without one.
Every engine's task claims its cell before it writes there
(:mod:`minimal_attn.experiments.sweep_claim`: a Slurm job by its id, a local or Ray task
in the driver's name: host and pid), so two drivers on one ``out`` never write a cell at once.
"""

import math
import numbers
import os

from minimal_attn.errors import InputError, check_int_at_least
from minimal_attn.experiments.processes import this_process
from minimal_attn.experiments.sweep_cell import cell_folder, died, run_tasks
from minimal_attn.experiments.sweep_claim import PROCESS, clear_ended
from minimal_attn.experiments.sweep_slurm import (  # noqa: F401 (importable from here too)
    UNKNOWN_GRACE,
    SlurmEngine,
    _job_file,
    _OrphanJob,
)

ENGINES = ("local", "ray", "slurm")


def need(module, extra):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"--engine {extra} needs {module}: pip install \".[{extra}]\" "
                         f"(or pip install {module})", param="engine") from None


class LocalEngine:
    """Cells one after another in this process; a death here is the driver's own."""

    name, parallel, resubmits, cells_per_job = "local", 1, False, 1

    def start(self, tasks):
        return None, [dict(t, claim=PROCESS) for t in tasks]   # this process claims them

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
        ray = self.ray = need("ray", "ray")
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
        # the worker claims in the driver's name, so a retry on another node is the same
        # writer; a dead driver's claim is cleared here, where that death can be seen
        writer = this_process()
        for t in tasks:
            clear_ended(cell_folder(t["out"], t["cell"].name))
        tasks = [dict(t, claim=PROCESS, writer=writer) for t in tasks]
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
                out.append((refs[ref], died(refs[ref][1], f"{type(exc).__name__}: "
                                             f"{text[:200]}")))
        return out

    def close(self):
        if self.started:
            self.ray.shutdown()


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
