"""Benchmark: K copies of one Snell model training side by side on one device, as K processes
(how ``attn-dyn agreement --workers`` runs a row's models) and as K threads of one process,
each on its own CUDA stream, against one copy alone.

Without MPS a card runs one process's kernels at a time and switches between processes
by time slices, while the streams of one process may overlap. A small LSTM's step is a
few cuDNN kernels that each leave most of the card idle, so whether the Table 2 rows can
meet issue 19's times (SST-2 in 3 min, Multi30k in 8) depends on which of the two shares
the card better. This measures it (not a test; it prints rates and their ratios):

    python benchmarks/bench_snell_sharing.py --dataset sst2 --device cuda --copies 4
    python benchmarks/bench_snell_sharing.py --dataset multi30k --device cuda --copies 3

Each copy trains its own model (seed k) for ``--steps`` Adam steps at the paper's widths,
with the step of ``train_seq`` (a batch cut from the padded split, the loss, backward,
clipping where the recipe clips, Adam), after two warm-up steps; the copies start
together (a barrier), and a way's rate is all copies' steps over the wall time from the
start to the last copy's end. Data loading and model building are not timed.
"""

import multiprocessing
import queue
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _options import ArgumentParser, count, names  # noqa: E402  (beside this file: benchmarks/)

from minimal_attn.cli.main import run_script  # noqa: E402
from minimal_attn.errors import InputError  # noqa: E402

WAYS = ("processes", "threads")
#: Longest wait at the start line for the other copies (data loading and warm-up).
BARRIER_SECONDS = 600


def _task(args):
    from minimal_attn.datasets.seq import load_text_task

    kind = "classify" if args.dataset == "sst2" else "translate"
    return load_text_task(kind, args.dataset, args.data_dir, max_train=args.max_train)


def _setup(args, seed, task=None):
    """(task, model, optimizer, split, config) of copy ``seed``, on ``args.device``."""
    from snell_profile import build_step  # beside this file (benchmarks/)

    from minimal_attn.backends.snell.config import SeqTrainConfig

    task = task or _task(args)
    c = SeqTrainConfig(task=task.task, device=args.device).resolved()
    return (task, *build_step(task, c, args.device, seed), c)


def _train(args, seed, setup=None, barrier=None):
    """Train copy ``seed``; returns (start, end) of its timed steps on the monotonic clock
    (system-wide on Linux, so processes' times compare)."""
    import torch

    from minimal_attn.backends.snell.eval import batch_loss
    from minimal_attn.backends.snell.train import batch_indices

    task, model, opt, split, c = setup or _setup(args, seed)
    cuda = args.device == "cuda"
    stream = torch.cuda.Stream() if cuda else None

    def steps(first, n):
        for step in range(first, first + n):
            loss = batch_loss(model, task, split.batch(
                batch_indices(step, c.batch_size, len(split), seed)))
            opt.zero_grad()
            loss.backward()
            if c.clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), c.clip)
            opt.step()
        if cuda:
            torch.cuda.current_stream().synchronize()

    if cuda:                      # after the copies to the card of the data and the model
        stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream) if cuda else nullcontext():
        steps(0, 2)                                      # warm-up: cuDNN plans, Adam state
        if barrier is not None:
            barrier.wait(timeout=BARRIER_SECONDS)       # a copy that failed breaks it
        began = time.monotonic()
        steps(2, args.steps)
        return began, time.monotonic()


def _child(args, seed, threads, barrier, out):
    import torch

    torch.set_num_threads(threads)
    out.put(_train(args, seed, barrier=barrier))


def _side_by_side(args, way):
    """Wall seconds of ``args.copies`` copies trained at once, ``way``."""
    if way == "threads":
        task = _task(args)
        setups = [_setup(args, k, task) for k in range(args.copies)]
        barrier, spans = threading.Barrier(args.copies), [None] * args.copies

        def run(k):
            try:
                spans[k] = _train(args, k, setups[k], barrier)
            except BaseException:
                barrier.abort()              # the others stop waiting for this one
                raise
        workers = [threading.Thread(target=run, args=(k,)) for k in range(args.copies)]
    else:
        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(args.copies), ctx.Queue()
        workers = [ctx.Process(target=_child, args=(args, k, args.threads, barrier, out))
                   for k in range(args.copies)]
    for w in workers:
        w.start()
    if way == "processes":
        spans = []
        while len(spans) < len(workers):
            try:
                spans.append(out.get(timeout=5))
            except queue.Empty:
                dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if dead:
                    for w in workers:
                        w.terminate()
                    raise RuntimeError(f"a copy's process ended with exit code {dead[0]} "
                                       "(its traceback is above)") from None
    for w in workers:
        w.join()
    if any(s is None for s in spans):
        raise RuntimeError(f"a copy trained with {way} ended without its times")
    return max(end for _, end in spans) - min(start for start, _ in spans)


def main():
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="sst2", choices=["sst2", "multi30k"])
    ap.add_argument("--data-dir", default=None, help="[../shared/data/DATASET]")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--copies", type=count(2), default=4, help="models side by side")
    ap.add_argument("--steps", type=count(), default=200, help="timed Adam steps a copy")
    ap.add_argument("--ways", type=names(WAYS), default=",".join(WAYS),
                    help="of: " + ", ".join(WAYS))
    ap.add_argument("--max-train", type=count(), default=None, help="training examples kept")
    ap.add_argument("--threads", type=count(), default=1, help="torch CPU threads a copy")
    args = ap.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: torch sees no CUDA GPU; use --device cpu",
                         param="device")
    args.data_dir = args.data_dir or str(ROOT.parent / "shared" / "data" / args.dataset)
    torch.set_num_threads(args.threads)
    began, ended = _train(args, 0)
    rate = args.steps / (ended - began)
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    print(f"{args.dataset} at the paper's widths, {args.steps} steps a copy, {name}: one copy "
          f"alone {1e3 / rate:.1f} ms/step, {rate:.1f} steps/s")
    for way in args.ways:
        wall = _side_by_side(args, way)
        together = args.copies * args.steps / wall
        print(f"{args.copies} copies as {way}: {together:.1f} steps/s together, "
              f"{1e3 * wall / args.steps:.1f} ms/step each, {together / rate:.2f}x one alone")
    return 0


if __name__ == "__main__":
    run_script(main)
