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
these calls into click bars, and any callable of this shape works from Python
(a logger, a test that stops a run at a given step).

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
