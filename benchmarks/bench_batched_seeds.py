"""Training throughput: S seeds of one paradigm batched vs S sequential ``train_run`` calls.

Both sides do the same work: S seeds x E epochs of SGD with momentum (or Adam,
``--optimizer adam``, with the mirrored start) on the same
mosaics (``load_mosaic_splits("synthetic", ...)``), a test evaluation after
every epoch and a final train and test evaluation per seed.

* **sequential**: ``vr.train.train_run`` once per seed (the plain loop);
* **batched (loop)** / **batched (grouped)** / **batched (unfold)**: a ``BatchedSeeds``
  through ``run_seeds``, as ``batched_seeds.train_seeds`` trains it (it ends with the
  same final evaluations), with per-seed convolutions (the CPU default), one grouped
  convolution per layer (the GPU default; channels-last or NCHW) or one batched
  matrix product of image patches per layer (``batched.MODES``).

``--compile none,compile,cudagraph`` adds each batched mode run through
``torch.compile`` or captured in CUDA graphs (``TrainConfig.compile``), and
``--precision fp32,tf32,bf16`` each in TF32 matmuls (CUDA) or under bfloat16
autocast (``TrainConfig.precision``), each with its ratio against the same mode
run plainly (eager, fp32: the "vs plain" column). Each variant is warmed up (sequential:
one step, cuDNN autotuning; batched: one epoch on the timed data, whose trainer
with its compiled code or graphs the timed rounds reuse); rounds alternate
between the variants so a busy shared machine slows all alike, and the best
round of each counts. mosaics/s = S * E * n_train / seconds; the ratio is
best vs best against sequential (``--no-sequential``: the first variant). The CPU
seconds of this process are printed too: on a busy shared CPU they are less
disturbed by other jobs than wall time.

    python benchmarks/bench_batched_seeds.py --width 0.25 --n-train 200 --epochs 1
    python benchmarks/bench_batched_seeds.py --device cuda --seeds 12 --n-train 2000 --epochs 2

``--json FILE`` also writes the timings (seconds and mosaics/s per variant). A batched
variant that fails in its warm-up (a capture the card refuses) is left out and named
(under "failed" in the JSON); the others are timed.

``--profile`` (``step_profile.py``): the wall time of a training step of the batched model
(mean of 5, after the warm-up, without the profiler); then one step under
``torch.profiler``, cut into data (the batch's gather),
forward (losses and per-seed bookkeeping), backward and the optimizer step. Per
part it prints the aten operators dispatched (all, and the outermost ones: a
call from Python or autograd, not counting the operators it calls inside) and,
on CUDA, the kernels launched, the time the kernels kept the card busy (against the
wall time: far under it, the card waits for the host) and the longest kernels; then the
most frequent outermost operators. On
the CPU the whole batch goes through each network in one call (``--chunk``
defaults to B*m there), as on a GPU, so the counts are the GPU's launches' proxy.
With ``--compile``, each listed way is profiled; compiled or captured steps as one
part (their fused kernels are not aten operators: the other events are listed):

    python benchmarks/bench_batched_seeds.py --profile --seeds 12 --batch 100 \
        --optimizer adam --classifier lenet --modes grouped_nchw
"""

import sys
import time

import torch
from _options import ArgumentParser, count, names, positive  # beside this file (benchmarks/)
from step_profile import profile_step

from minimal_attn import PARADIGMS
from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.batched_step import check_precision
from minimal_attn.backends.vr.batched_train import BatchedSeeds
from minimal_attn.backends.vr.cost import bound_report
from minimal_attn.backends.vr.models import classifier_config, focus_config, scaled
from minimal_attn.backends.vr.train import TrainConfig, train_run
from minimal_attn.cli.main import run_script
from minimal_attn.datasets.splits import load_mosaic_splits
from minimal_attn.errors import InputError
from minimal_attn.experiments.epochs import run_seeds
from minimal_attn.experiments.io import write_json
from minimal_attn.experiments.train_loop import COMPILE_MODES, CONV_MODES, PRECISIONS


def sequential(config, seeds, splits):
    for seed in seeds:
        config.seed = seed
        train_run(config, splits.train, splits.test, progress=False)


def batched(mode, how="none", precision="fp32"):
    """S seeds as one ``BatchedSeeds`` (``compile=how``, ``precision``) through the epoch
    loop, as ``train_seeds`` runs them. One trainer per data set, kept across calls, so the
    warm-up call compiles (or captures) and the timed rounds reuse the result."""
    trainers = {}

    def go(config, seeds, splits):
        configs = [TrainConfig(**{**vars(config), "seed": s, "compile": how,
                               "precision": precision}) for s in seeds]
        if id(splits) not in trainers:
            trainers[id(splits)] = BatchedSeeds(configs, splits.train, splits.test, mode)
        run_seeds(configs, trainers[id(splits)], "bench")
    return go


def timed(fn, config, seeds, splits, device):
    """(wall seconds, CPU seconds of this process) of one call."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start, cpu = time.perf_counter(), time.process_time()
    fn(config, seeds, splits)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, time.process_time() - cpu


def main():
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:K")
    parser.add_argument("--seeds", type=count(), default=12)
    parser.add_argument("--paradigm", default="ha", choices=PARADIGMS)
    parser.add_argument("--m", type=count(2), default=5)
    parser.add_argument("--n-train", type=count(), default=200)
    parser.add_argument("--n-test", type=count(), default=100)
    parser.add_argument("--epochs", type=count(), default=1)
    parser.add_argument("--batch", type=count(), default=25)
    parser.add_argument("--width", type=positive, default=1.0)
    parser.add_argument("--modes", type=names(CONV_MODES), default=None,
                        help="batched variants, comma list of loop,grouped,grouped_nchw,"
                             "unfold (default: loop on cpu, all four on cuda)")
    parser.add_argument("--rounds", type=count(), default=1)
    parser.add_argument("--threads", type=count(), default=1, help="torch CPU threads")
    parser.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    parser.add_argument("--classifier", default="paper", choices=("paper", "lenet"))
    parser.add_argument("--chunk", type=count(), default=None,
                        help="images per network call (default: by device; with --profile "
                             "B*m, the whole batch, as on a GPU)")
    parser.add_argument("--compile", type=names(COMPILE_MODES), default="none",
                        help="how batched steps run, comma list of none,compile,cudagraph "
                             "(TrainConfig.compile; cudagraph on CUDA only)")
    parser.add_argument("--precision", type=names(PRECISIONS), default="fp32",
                        help="batched arithmetic, comma list of fp32,tf32,bf16 "
                             "(TrainConfig.precision; tf32 on CUDA only)")
    parser.add_argument("--no-sequential", action="store_true",
                        help="skip the sequential baseline (ratios against the first variant)")
    parser.add_argument("--profile", action="store_true",
                        help="count the operators of one training step (no timing)")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="also write the timings to FILE (JSON: seconds and mosaics/s "
                             "per variant), e.g. for gpu_cells.sh's step probe")
    args = parser.parse_args()
    device = tb.get_device(args.device)
    for precision in args.precision:                       # tf32 on CUDA only
        check_precision(precision, device)
    if "cudagraph" in args.compile and device.type != "cuda":
        raise InputError(f"--compile cudagraph captures the step in a CUDA graph and needs "
                         f"--device cuda, got {device}", param="compile")
    torch.set_num_threads(args.threads)
    modes = args.modes or (["grouped", "grouped_nchw", "loop", "unfold"]
                           if device.type == "cuda" else ["loop"])
    seeds = list(range(args.seeds))
    config = TrainConfig(paradigm=args.paradigm, epochs=args.epochs, batch_size=args.batch,
                         width=args.width, device=str(device), switch_epoch=args.epochs // 2,
                         optimizer=args.optimizer, classifier=args.classifier,
                         focus_init="mirror" if args.optimizer == "adam" else "zero",
                         chunk=args.chunk if args.chunk or not args.profile
                         else args.batch * args.m)
    if args.profile:
        splits = load_mosaic_splits("synthetic", args.m, max(args.n_train, args.batch), 1)
        for mode in modes:
            for how in args.compile:
                for precision in args.precision:
                    profile_step(TrainConfig(**{**vars(config), "compile": how,
                                                "precision": precision}),
                                 seeds, splits, mode, device)
        return
    splits = load_mosaic_splits("synthetic", args.m, args.n_train, args.n_test)
    variants = {} if args.no_sequential else {"sequential": sequential}
    for mode in modes:
        for how in args.compile:
            for precision in args.precision:
                parts = [mode] + [how] * (how != "none") + [precision] * (precision != "fp32")
                variants[f"batched ({', '.join(parts)})"] = batched(mode, how, precision)

    warm = TrainConfig(**{**vars(config), "epochs": 1})
    # same batch and evaluation shapes as the timed runs, so cuDNN autotunes them here;
    # a batched variant warms up on the timed data (its trainer, compiled code and
    # CUDA graphs are kept for the timed rounds)
    warm_splits = load_mosaic_splits("synthetic", args.m, args.batch, args.n_test)
    failed = {}
    for name, fn in list(variants.items()):
        if fn is sequential:
            fn(warm, seeds[:2], warm_splits)
            continue
        try:
            fn(warm, seeds, splits)
        except (InputError, RuntimeError) as err:    # e.g. a capture this card refuses
            failed[name] = str(err).splitlines()[0][:300]
            del variants[name]
            print(f"{name}: failed in its warm-up, left out ({failed[name]})", file=sys.stderr)
    if not variants:
        print("Error: every variant failed in its warm-up (above)", file=sys.stderr)
        sys.exit(2)
    rounds = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            rounds[name].append(timed(fn, config, seeds, splits, device))
    seconds = {name: min(v[0] for v in values) for name, values in rounds.items()}
    cpu = {name: min(v[1] for v in values) for name, values in rounds.items()}

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {device} ({name}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}")
    print(f"{args.seeds} seeds, paradigm {args.paradigm}, m={args.m}, width {args.width}, "
          f"n_train {args.n_train}, n_test {args.n_test}, batch {args.batch}, "
          f"{args.optimizer}, {args.classifier} classifier, "
          f"{args.epochs} epoch(s), best of {args.rounds} round(s)")
    work = args.seeds * args.epochs * args.n_train
    first = next(iter(seconds))
    print(f"{'variant':<40}{'seconds':>9}{'mosaics/s':>11}{'ratio vs ' + first:>{len(first) + 12}}"
          f"{'CPU s':>8}{'CPU ratio':>11}{'vs plain':>10}")
    for variant, sec in seconds.items():
        eager = variant.split(",")[0].rstrip(")") + ")"     # the same mode, eager, fp32
        versus = f"{seconds[eager] / sec:>10.2f}" if eager in seconds and "," in variant \
            else f"{'':>10}"
        print(f"{variant:<40}{sec:>9.2f}{work / sec:>11.1f}"
              f"{seconds[first] / sec:>{len(first) + 12}.2f}"
              f"{cpu[variant]:>8.2f}{cpu[first] / cpu[variant]:>11.2f}{versus}")
    best = min(seconds, key=seconds.get)
    if args.json:
        write_json(args.json, {
            "device": str(device), "card": name, "torch": torch.__version__,
            "seeds": args.seeds, "paradigm": args.paradigm, "m": args.m,
            "batch": args.batch, "optimizer": args.optimizer, "n_train": args.n_train,
            "epochs": args.epochs, "width": args.width, "best": best, "failed": failed,
            "variants": {v: {"seconds": sec, "mosaics_per_s": work / sec}
                         for v, sec in seconds.items()}})
    focus = scaled(focus_config(config.dataset, config.focus_init), args.width)
    classifier = scaled(classifier_config(config.dataset, 3, config.classifier), args.width)
    print(f"bound ({best}, mosaics/s summed over seeds, epochs' evaluations included): "
          + bound_report(work / seconds[best], focus, classifier, args.m, args.paradigm, name,
                         "bf16" if "bf16" in best else "fp32"))


if __name__ == "__main__":
    run_script(main)
