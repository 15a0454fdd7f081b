"""Where the time of one Snell training step goes (batch, forward, backward, Adam): the
``--profile`` half of ``bench_snell_agreement.py --train-steps-only``. No command of its own.

A step of :func:`minimal_attn.backends.snell.train.train_seq` (the same batch, loss,
backward and foreach Adam; the divergence flag and the lr schedule left out) is timed
three ways, each the mean over ``steps`` steps after three warm-up steps:

* **paced**: steps back to back, the card waited for only at the end: the training
  loop's pace;
* **host**: what each part costs the host in the paced run (the time until its Python
  call returns). A part that waits for the card (a read of a device number, a copy from
  pageable memory) includes the wait;
* **synced**: each step waited for before the next starts (as the ``--train-steps-only``
  line above it times a step).

Then ``torch.profiler`` records five paced steps, whose CUDA kernels give the time the
card was busy (the union of their intervals, :func:`step_profile.device_busy`), and each
part once more on its own, whose events give per part: the aten operators dispatched
(all, and the outermost ones), the CUDA kernels and launches, and the **host waits**:
the CUDA runtime calls that make the host wait for the card (:data:`HOST_WAITS`).

Reading it: busy far under paced, no host waits: the card waits for the host's launches,
and fewer launches a step are the lever (a captured step); host waits in a part: that part
serialises host and card, and removing the wait comes first; busy near paced: the card's
own kernels are the cost (the longest are listed). On the CPU there are no kernels; the
operator counts there include the LSTMs' per-time-step operators, which cuDNN runs as a
few calls on a card.
"""

import collections
import time

import torch
from step_profile import count_ops, device_busy  # beside this file (benchmarks/)

from minimal_attn.backends.snell.batches import SplitTensors
from minimal_attn.backends.snell.eval import batch_loss
from minimal_attn.backends.snell.train import batch_indices, build_model

#: CUDA runtime calls that block the host until the card has done work queued before
#: them (torch follows a blocking copy with a stream synchronisation).
HOST_WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize")

PARTS = ("batch", "forward", "backward", "optimizer")


def host_waits(events):
    """Counter of the :data:`HOST_WAITS` calls among profiler ``events``."""
    return collections.Counter(e.name for e in events if e.name in HOST_WAITS)


def build_step(task, c, device, seed):
    """(model, Adam, training split on ``device``) of a model of config ``c`` seeded with
    ``seed``, as :func:`~minimal_attn.backends.snell.train.train_seq` builds them (also the
    copies of ``bench_snell_sharing.py``)."""
    torch.manual_seed(seed)
    model = build_model(task, c).to(device)
    model.train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=c.lr,
                           foreach=True)
    return model, opt, SplitTensors(task, task.train_src, task.train_tgt, device)


def _step_parts(task, c, device):
    """The four parts of a training step, each a function of the step number."""
    model, opt, split = build_step(task, c, device, c.seed)
    state = {}

    def batch(step):          # zeroes the gradients too (the loop does so before backward)
        opt.zero_grad()
        state["batch"] = split.batch(batch_indices(step, c.batch_size, len(split), c.seed))

    parts = {"batch": batch,
             "forward": lambda step: state.update(loss=batch_loss(model, task,
                                                                  state["batch"])),
             "backward": lambda step: state["loss"].backward(),
             "optimizer": lambda step: opt.step()}
    return parts


def profile_seq_step(task, c, device, steps=20, top=10):
    """Print where a step of the model of config ``c`` (resolved) on ``task`` spends its
    time on ``device``; returns the figures as a dict (milliseconds a step)."""
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    parts = _step_parts(task, c, device)
    host = collections.defaultdict(float)

    def run(first, n, wait_each=False):
        for step in range(first, first + n):
            for name, part in parts.items():
                t0 = time.perf_counter()
                part(step)
                host[name] += time.perf_counter() - t0
            if wait_each:
                sync()
        sync()

    run(0, 3)
    host.clear()
    t0 = time.perf_counter()
    run(3, steps)
    paced = (time.perf_counter() - t0) / steps * 1e3
    host_ms = {name: host[name] / steps * 1e3 for name in PARTS}
    t0 = time.perf_counter()
    run(3 + steps, steps, wait_each=True)
    synced = (time.perf_counter() - t0) / steps * 1e3
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    first = 3 + 2 * steps
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        run(first, 5)
        window = (time.perf_counter() - t0) / 5 * 1e3
    busy, per_kernel = device_busy(prof.events())
    counts, waits = {}, {}
    step = first + 5
    for name, part in parts.items():             # one step, part by part
        with profile(activities=activities) as prof:
            part(step)
            sync()
        counts[name], waits[name] = count_ops(prof), host_waits(prof.events())
    _print(task, c, device, steps, paced, synced, host_ms, counts, waits,
           busy / 5e3, window, per_kernel, top)
    return {"paced_ms": paced, "synced_ms": synced, "host_ms": host_ms,
            "busy_ms": busy / 5e3 if cuda else None,
            "host_waits": {n: sum(w.values()) for n, w in waits.items()},
            "aten_ops": {n: counts[n][0] for n in PARTS},
            "outermost": {n: dict(counts[n][5]) for n in PARTS},
            "kernels": {n: counts[n][3] for n in PARTS} if cuda else None}


def _print(task, c, device, steps, paced, synced, host_ms, counts, waits, busy, window,
           per_kernel, top):
    cuda = device.type == "cuda"
    print(f"profile of one {task.task} step: hidden {c.hidden}, emb {c.emb}, batch "
          f"{c.batch_size}, {task.n_vocab} ids, {device}, torch {torch.__version__}")
    print(f"paced {paced:.2f} ms/step ({steps} steps back to back); synced {synced:.2f} "
          f"ms/step (each step waited for)")
    print(f"{'part':<11}{'host ms':>9}{'aten ops':>10}{'outermost':>11}{'CUDA kernels':>14}"
          f"{'launches':>10}{'host waits':>12}")
    rows = [(n, host_ms[n], *counts[n][:2], *counts[n][3:5], sum(waits[n].values()))
            for n in PARTS]
    rows.append(("step",) + tuple(sum(r[i] for r in rows) for i in range(1, 7)))
    for name, ms, n_all, n_top, n_kernels, n_launch, n_wait in rows:
        print(f"{name:<11}{ms:>9.2f}{n_all:>10}{n_top:>11}{n_kernels if cuda else '-':>14}"
              f"{n_launch if cuda else '-':>10}{n_wait if cuda else '-':>12}")
    if cuda:
        print(f"CUDA kernels busy {busy:.2f} ms a step ({100 * busy / window:.0f}% of the "
              f"profiled steps' {window:.2f} ms); the longest kernels, ms a step:")
        for kernel, us in per_kernel.most_common(top):
            print(f"  {us / 5e3:8.3f}  {kernel[:100]}")
        for name in PARTS:
            if waits[name]:
                print(f"host waits in {name}: " + ", ".join(
                    f"{call} {n}" for call, n in waits[name].most_common()))
    for name in PARTS:
        names = counts[name][5]
        print(f"{name}: " + ", ".join(f"{op[6:]} {n}" for op, n in names.most_common(top)))
