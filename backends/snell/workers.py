"""A Table 2 row's jobs side by side, each in its own process (``AgreementConfig.workers``).

The models of one row (standard, second, uniform, frozen) and the proxy fit do not
depend on one another: each reads the same data and writes its own folder or cache
file. One after another, a small LSTM leaves a GPU idle between its kernel launches
(and on a CPU one process uses few of the cores), so :func:`run_jobs` can start up to
``workers`` of them at once in spawned processes. A job is ``(function, args, units)``;
the function takes ``task`` (None in a child: it loads the data itself), ``progress`` and
``log`` keywords. What each job computes does not depend on where it runs: a job
seeds itself, and its child uses ``threads`` torch CPU threads (the row passes its
share of its own). On a CPU the thread count changes float rounding, so the row equals
the one-after-another row run with that many threads (tests/test_agreement_workers.py:
one); on a GPU the models' arithmetic is on the card.

Progress from the children comes through one queue and is reported as one task (the
jobs' summed units done, the newest note named by its job). A job refused
(:class:`~minimal_attn.errors.InputError`, e.g. a model that diverged) stops the others
and is raised here as itself; a child that dies otherwise raises ``RuntimeError`` with
its traceback. Ctrl-C is left to this process (the children ignore it), which stops them
on its way out: their checkpoints are what a rerun continues from.
"""

import os
import queue as queue_module
import time
import traceback

from minimal_attn.errors import DivergedError, InputError

#: Least seconds between a child's progress reports (an evaluation's note and the last
#: step are always sent).
REPORT_SECONDS = 0.2


def run_jobs(jobs, workers, task=None, progress=None, log=None, threads=1, label="models"):
    """Run ``jobs`` (``{name: (function, args, units)}``), at most ``workers`` at a time.

    ``workers == 1``: here, in order, each called with this process's ``task``,
    ``progress`` and ``log``, as if there were no workers. Otherwise each in a spawned
    process with ``threads`` torch CPU threads; ``progress(label, done, total, note)``
    then hears of them together as task ``label`` (``units``: a job's share of the
    total, e.g. its steps). Returns each job's wall seconds, from its start to its end
    (a child's include starting Python, importing torch and loading the data).
    """
    if isinstance(workers, bool) or int(workers) != workers or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers}", param="workers")
    seconds = {}
    if workers == 1:
        for name, (fn, args, _) in jobs.items():
            began = time.perf_counter()
            fn(*args, task=task, progress=progress, log=log)
            seconds[name] = time.perf_counter() - began
        return seconds
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    inbox = ctx.Queue()
    waiting, running = list(jobs), {}
    done, total = dict.fromkeys(jobs, 0), sum(units for *_, units in jobs.values())
    began = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                name = waiting.pop(0)
                fn, args, _ = jobs[name]
                running[name] = ctx.Process(target=_child, name=f"attn-dyn {name}",
                                            args=(fn, args, name, threads, inbox, os.getpid()),
                                            daemon=True)
                running[name].start()
                began[name] = time.perf_counter()
            try:
                kind, name, *rest = inbox.get(timeout=1.0)
            except queue_module.Empty:
                for name, proc in running.items():
                    if not proc.is_alive():     # gone without a word: killed, out of memory
                        raise RuntimeError(
                            f"the worker for {name} ended with exit code {proc.exitcode} and "
                            "no result (from a script, call this under `if __name__ == "
                            "'__main__':`: a spawned worker imports the script again)") \
                            from None
                continue
            if kind == "progress":
                units, (step, steps, note) = jobs[name][2], rest
                done[name] = units * step / max(steps, 1)
                if progress:
                    progress(label, round(sum(done.values())), total,
                             None if note is None else f"{name}: {note}")
            elif kind == "log":
                if log:
                    log(rest[0])
            elif kind == "done":            # (a reused model may have sent no step)
                running.pop(name).join()
                seconds[name] = time.perf_counter() - began[name]
                done[name] = jobs[name][2]
                if progress:
                    progress(label, round(sum(done.values())), total, None)
            elif kind == "refused":                 # as itself: a divergence stays one
                raise (DivergedError if rest[2] else InputError)(rest[0], param=rest[1])
            else:
                raise RuntimeError(f"the worker for {name} failed:\n{rest[0]}")
    finally:
        for proc in running.values():
            if proc.is_alive():
                proc.terminate()
            proc.join()
        inbox.close()
    return seconds


def _child(fn, args, name, threads, inbox, parent):
    """A spawned worker: one job, its progress and log lines sent to the parent (pid
    ``parent``, given by it: read here after the slow torch import, a parent killed
    meanwhile would already be init, and its orphan would train on)."""
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C: run_jobs stops us
    torch.set_num_threads(threads)
    last = [0.0]

    def progress(_label, done, total, note=None):
        if os.getppid() != parent:        # the parent was killed (e.g. by a time limit):
            os._exit(1)                   # stop rather than hold the card on our own
        now = time.monotonic()
        if note is not None or done >= total or now - last[0] >= REPORT_SECONDS:
            last[0] = now
            inbox.put(("progress", name, done, total, note))

    if os.getppid() != parent:            # killed while this worker started
        os._exit(1)
    try:
        fn(*args, task=None, progress=progress, log=lambda line: inbox.put(("log", name, line)))
    except InputError as err:
        inbox.put(("refused", name, str(err), err.param, isinstance(err, DivergedError)))
    except Exception:                     # noqa: BLE001 (sent to the parent whole)
        inbox.put(("error", name, traceback.format_exc()))
    else:
        inbox.put(("done", name))
