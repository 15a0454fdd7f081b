"""The Slurm job of one sweep cell (imported only by ``--engine slurm``: needs submitit).

A :class:`submitit.helpers.Checkpointable` callable: when Slurm pre-empts the
job or its time runs out, submitit requeues the same call, and the cell
resumes from the checkpoint of its last finished epoch.
"""

import submitit

from minimal_attn.experiments.sweep_cell import run_tasks


class CellJob(submitit.helpers.Checkpointable):
    def __call__(self, tasks):
        return run_tasks(tasks)

    def checkpoint(self, tasks):
        # the requeued job resumes every cell from its checkpoint (finished ones are skipped)
        return submitit.helpers.DelayedSubmission(self, [dict(t, resume=True) for t in tasks])
