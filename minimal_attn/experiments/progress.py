r"""Progress: the one callback shape the library calls while a run works.

Every long library call (``run_experiment``, ``run_hatexplain``, ``run_ode``,
``run_fixed_focus``, ``run_ibm1``, ``run_proxy``, ``train_seq``,
``run_agreement``, ``run_synthetic``) takes ``progress=None`` and calls it as

    progress(label, done, total, note=None)

``label`` names the task under way ("sa seed 0 epoch 3/10", "standard",
"training", "EM"); ``done`` of ``total`` units of that task are finished
(absolute counts, so a resumed run starts where it stands); ``note`` is a short
text to show beside the bar ("loss 0.4123"), or None. A new label starts a new
task. The library never draws: ``minimal_attn.cli.options.ProgressBar`` turns
these calls into click bars on a terminal, and elsewhere (a log file, a batch job)
into :class:`StatusLines`, a plain line at most once a minute; any callable of this
shape works from Python (a logger, a test that stops a run at a given step).

Two other hooks stay apart on purpose, because they are not progress:

* ``log(line)``: text lines for a person (one line per epoch, warnings,
  per-seed results), printed by the CLI whether or not bars are drawn;
* records: ``callback(epoch, record)`` of the epoch loop and ``on_epoch(record)``
  of the Table 1 drivers hand over each epoch's history record (data, kept in
  ``history.jsonl``), and the textbook's loops (``fcam.train``,
  ``ibm1.train_ibm1``, ``proxy.train_proxy``, ``dynamics.simulate``,
  ``fixed_focus.fixed_focus_curves``) take a plain per-step ``callback``: they
  know nothing of labels or bars, and the runners here turn those steps into
  ``progress`` calls.
"""

import sys
import time
from typing import Optional, Protocol


class Progress(Protocol):
    """The progress callback: ``done`` of ``total`` units of task ``label`` are finished."""

    def __call__(self, label: str, done: int, total: int,
                 note: Optional[str] = None) -> None: ...


def counter(progress, label, total, done=0):
    """``tick(n=1, note=None)``: advance task ``label`` by ``n`` units and report it.

    ``progress`` None (or False) gives a tick that does nothing, so loops call
    ``tick`` unconditionally. ``done``: units already finished (a resumed run).
    """
    if not progress:
        return lambda n=1, note=None: None
    state = [done]

    def tick(n=1, note=None):
        state[0] += n
        progress(label, state[0], total, note)
    return tick


class StatusLines:
    """A progress callback for a log: one plain line to ``stream`` at most every ``every``
    seconds, ``label: done/total (note), h:mm:ss elapsed`` (the task's last note).

    Where no bar can be drawn (stderr a file, a pipe, a CI or Slurm log) a long loop would
    otherwise print nothing for minutes. A line is written at a call that comes ``every``
    seconds or more after the last line (or after the start), so a run shorter than that
    prints nothing. ``stream`` None: ``sys.stderr`` as it is at each line (stdout stays the
    results'); ``clock``: seconds, :func:`time.monotonic` unless a test gives its own.
    """

    def __init__(self, stream=None, every=60.0, clock=None):
        self.stream, self.every, self.clock = stream, float(every), clock or time.monotonic
        self.start = self.last = self.clock()
        self.label = self.note = None

    def __call__(self, label, done, total, note=None):
        if label != self.label:
            self.label, self.note = label, None
        self.note = self.note if note is None else note      # a task's last note is kept
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        seconds = int(now - self.start)
        elapsed = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        stream = self.stream or sys.stderr
        stream.write(f"{label}: {done}/{total}" + (f" ({self.note})" if self.note else "")
                     + f", {elapsed} elapsed\n")
        stream.flush()
