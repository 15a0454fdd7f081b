"""Operators (and CUDA kernels) of one batched CNN FCAM training step, part by part:
the ``--profile`` half of ``bench_batched_seeds.py`` (its docstring says how to read the
table). Used from there; no command of its own."""

import collections
import time

import torch

from minimal_attn.backends.vr.batched_train import BatchedSeeds
from minimal_attn.backends.vr.train import TrainConfig


def _outermost_aten(events):
    """The aten events of ``events`` that no other aten event encloses."""
    def inner(e):
        parent = e.cpu_parent
        while parent is not None:
            if parent.name.startswith("aten::"):
                return True
            parent = parent.cpu_parent
        return False
    return [e for e in events if e.name.startswith("aten::") and not inner(e)]


#: aten operators that only make a new view or an empty tensor: no kernel on a GPU.
NO_KERNEL = {"aten::" + name for name in (
    "view alias reshape _reshape_alias _unsafe_view transpose t permute expand unsqueeze "
    "squeeze select slice narrow as_strided as_strided_ split unbind detach detach_ "
    "lift_fresh empty empty_like empty_strided new_empty new_empty_strided resize_ "
    "resolve_conj resolve_neg to").split()}


#: The CUDA runtime's calls that launch work: kernels, graphs, copies.
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC",
            "cudaGraphLaunch", "cudaMemcpyAsync")


def count_ops(prof):
    """(aten ops dispatched, outermost aten ops, leaf compute ops, CUDA kernels, CUDA
    launches from the host, Counter of outermost names, Counter of the other CPU events).
    Leaf compute ops: aten ops not in :data:`NO_KERNEL` that call no other such op (on
    the CPU, the proxy of a GPU's kernel launches)."""
    from torch.autograd import DeviceType

    events = prof.events()
    aten = [e for e in events if e.name.startswith("aten::")
            and e.device_type == DeviceType.CPU]
    top = _outermost_aten(aten)
    def computes(e):                  # e or an operator it calls does arithmetic
        return e.name.startswith("aten::") and (e.name not in NO_KERNEL
                                                or any(map(computes, e.cpu_children)))
    leaves = [e for e in aten if e.name not in NO_KERNEL
              and not any(map(computes, e.cpu_children))]
    kernels = sum(1 for e in events if e.device_type == DeviceType.CUDA)
    launches = sum(1 for e in events if e.name in LAUNCHES)
    others = collections.Counter(e.name for e in events if e.device_type == DeviceType.CPU
                                 and not e.name.startswith("aten::"))
    return (len(aten), len(top), len(leaves), kernels, launches,
            collections.Counter(e.name for e in top), others)


def device_busy(events):
    """(busy microseconds, Counter of microseconds per kernel name) of the CUDA kernels
    among ``events``. Busy time is the union of the kernels' intervals (kernels of
    several streams may overlap); set beside the step's wall time it says whether the
    card waits for the host (busy well under the wall time) or the host for the card."""
    from torch.autograd import DeviceType

    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    busy, reached = 0.0, float("-inf")
    for start, end in sorted((e.time_range.start, e.time_range.end) for e in kernels):
        if end > reached:
            busy += end - max(start, reached)
            reached = end
    per_name = collections.Counter()
    for e in kernels:
        per_name[e.name] += e.time_range.end - e.time_range.start
    return busy, per_name


def profile_step(config, seeds, splits, mode, device, top=12, timed_steps=5):
    """Operators (and CUDA kernels) of one batched training step, part by part; with
    ``config.compile`` other than none, the whole step through its runner as one part."""
    from torch.profiler import ProfilerActivity, profile

    from minimal_attn.backends.vr.batched_step import WARMUP

    trainer = BatchedSeeds([TrainConfig(**{**vars(config), "seed": s}) for s in seeds],
                           splits.train, splits.test, mode)
    phase = "sa" if config.paradigm == "hybrid" else config.paradigm
    picks, lrs = trainer._groups([phase] * len(seeds)), [1e-3] * len(seeds)
    gen = torch.Generator().manual_seed(0)
    idx = torch.stack([torch.randperm(trainer.stores["train"].n, generator=gen)[:config.batch_size]
                       for _ in seeds]).to(device)                     # (S, B)
    sums = torch.zeros(len(seeds), 3, dtype=torch.float64, device=device)
    state = {}
    parts = {"data": lambda: state.update(batch=trainer.batch(idx)),
             "forward": lambda: state.update(total=trainer.forward(*state["batch"], picks,
                                                                   sums)),
             "backward": lambda: state["total"].backward(),
             "optimizer": lambda: trainer.optimizer.step(lrs)}
    if trainer.runner is not None:          # compiled or captured: one part, the step
        parts = {config.compile: lambda: trainer.runner(idx, picks, sums, lrs, (phase,))}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                           if device.type == "cuda" else [])
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def steps(n):
        for _ in range(n):
            trainer.optimizer.zero_grad()
            for part in parts.values():
                part()
        sync()

    steps(WARMUP + 2)
    t0 = time.perf_counter()
    steps(timed_steps)                          # the wall time, without the profiler
    wall_ms = (time.perf_counter() - t0) / timed_steps * 1e3
    trainer.optimizer.zero_grad()
    counts, busy, per_kernel = {}, 0.0, collections.Counter()
    for name, part in parts.items():
        with profile(activities=activities) as prof:
            part()
            sync()
        counts[name] = count_ops(prof)
        part_busy, part_kernels = device_busy(prof.events())
        busy += part_busy
        per_kernel += part_kernels
    print(f"one step, {len(seeds)} seeds, paradigm {phase}, mode {mode}, "
          f"chunk {config.chunk}, {config.optimizer}, {config.classifier} classifier, "
          f"compile {config.compile}, precision {config.precision}, "
          f"batch {config.batch_size}, m={trainer.m}, torch {torch.__version__}, {device}")
    cuda = device.type == "cuda"
    print(f"{'part':<12}{'aten ops':>10}{'outermost':>11}{'leaf compute':>14}"
          f"{'CUDA kernels':>14}{'launches':>10}")
    for name, (n_all, n_top, n_leaf, n_kernels, n_launch, *_) in list(counts.items()) + [
            ("step", [sum(c[i] for c in counts.values()) for i in range(5)])]:
        print(f"{name:<12}{n_all:>10}{n_top:>11}{n_leaf:>14}"
              f"{n_kernels if cuda else '-':>14}{n_launch if cuda else '-':>10}")
    if cuda:
        print(f"step wall time {wall_ms:.2f} ms (mean of {timed_steps}, no profiler); CUDA "
              f"kernels busy {busy / 1e3:.2f} ms of it ({busy / 1e1 / wall_ms:.0f}%); "
              "the longest kernels, ms a step:")
        for kernel, us in per_kernel.most_common(top):
            print(f"  {us / 1e3:8.3f}  {kernel[:110]}")
    else:
        print(f"step wall time {wall_ms:.2f} ms (mean of {timed_steps}, no profiler)")
    for name, (*_, names, others) in counts.items():
        print(f"{name}: " + ", ".join(f"{op[6:]} {n}" for op, n in names.most_common(top)))
        if trainer.runner is not None:        # compiled kernels are not aten operators
            print("  other events: " + ", ".join(f"{op} {n}"
                                                 for op, n in others.most_common(top)))
