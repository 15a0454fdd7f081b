"""Benchmark: S seeds of a synthetic task as one seed-batched model vs S sequential runs.

Both sides run the same code (:func:`minimal_attn.backends.snell.synthetic_train.train_runs`,
the sequential side with one run at a time), the same task, width, batch and
number of Adam steps, one evaluation at the end; the batched run's parameters
must equal the sequential ones (printed as the largest difference). Prints the
wall-clock ratio sequential / batched.

    OMP_NUM_THREADS=1 python benchmarks/bench_synthetic_seeds.py [--seeds 20] [--steps 20]
        [--hidden 32] [--task control] [--device cpu|cuda]

On a GPU (about a minute on an H100):

    python benchmarks/bench_synthetic_seeds.py --device cuda --hidden 256 --embed 256 --steps 30

``--compile none,cudagraph`` also times the batched run with each step replayed as a
CUDA graph (:mod:`minimal_attn.backends.snell.synthetic_graph`), prints its speed-up over
the eager batched run, how its steps ran and its largest parameter difference from the
eager one (float32 rounding); ``--no-sequential`` leaves the sequential side out, and
``--paradigm`` trains with V&R's per-token losses:

    python benchmarks/bench_synthetic_seeds.py --device cuda --hidden 256 --embed 256 \
        --steps 100 --task permutation --compile none,cudagraph --no-sequential --paradigm ha
"""

import time

from _options import ArgumentParser, count, names  # beside this file (benchmarks/)

from minimal_attn.cli.main import run_script
from minimal_attn.errors import InputError


def _timed(fn, device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def main(argv=None):
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=count(), default=20)
    p.add_argument("--steps", type=count(), default=20)
    p.add_argument("--hidden", type=count(), default=32)
    p.add_argument("--embed", type=count(), default=None)
    p.add_argument("--batch-size", type=count(), default=32)
    p.add_argument("--task", default="control",
                   choices=["permutation", "control", "mixture", "permutation-function", "copy",
                            "keyword"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--compile", type=names(("none", "cudagraph")), default="none",
                   help="comma-separated: none and/or cudagraph (CUDA), for the batched run")
    p.add_argument("--paradigm", default="sa", choices=["sa", "ha", "lv", "hybrid"])
    p.add_argument("--no-sequential", action="store_true")
    args = p.parse_args(argv)
    if "cudagraph" in args.compile and args.device != "cuda":
        raise InputError("--compile cudagraph needs --device cuda", param="compile")

    import torch

    from minimal_attn.backends.snell.synthetic_train import Run, SyntheticConfig, train_runs

    if args.device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda but no CUDA GPU is visible; use --device cpu")
    if args.device == "cpu":
        torch.set_num_threads(1)
    heads = (lambda s: []) if args.task == "keyword" else (lambda s: [s])
    runs = [Run(args.task, s, init_seed=s, head_seeds=heads(s), data_seed=s)
            for s in range(args.seeds)]
    cfg = SyntheticConfig(steps=args.steps, hidden=args.hidden, embed=args.embed,
                          batch_size=args.batch_size, eval_every=args.steps, n_test=32,
                          device=args.device, uniform=args.task == "keyword",
                          paradigm=args.paradigm)
    train_runs(runs[:2], SyntheticConfig(**{**cfg.__dict__, "steps": 2, "eval_every": 2}))
    t_batched, together = _timed(lambda: train_runs(runs, cfg), args.device)
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu, 1 thread"
    print(f"{args.task}, {args.paradigm}: {args.seeds} seeds x {args.steps} steps, "
          f"H={args.hidden}, batch {args.batch_size}, {name}")
    print(f"  batched    {t_batched:8.2f} s   ({t_batched / args.steps * 1000:.1f} ms a step)")
    if not args.no_sequential:
        t_seq, alone = _timed(lambda: [train_runs([r], cfg) for r in runs], args.device)
        diff = max(float((together["params"][k][i] - a["params"][k][0]).abs().max())
                   for i, a in enumerate(alone) for k in a["params"])
        print(f"  sequential {t_seq:8.2f} s")
        print(f"  ratio sequential/batched {t_seq / t_batched:.2f}x   "
              f"(max |param difference| {diff:.2e})")
    if "cudagraph" in args.compile:
        graph_cfg = SyntheticConfig(**{**cfg.__dict__, "compile": "cudagraph"})
        t_graph, graphed = _timed(lambda: train_runs(runs, graph_cfg), args.device)
        diff = max(float((graphed["params"][k] - v).abs().max())
                   for k, v in together["params"].items())
        print(f"  batched, cudagraph {t_graph:8.2f} s   ({t_graph / args.steps * 1000:.1f} ms "
              f"a step, capture included): {t_batched / t_graph:.2f}x eager; steps ran "
              f"{graphed['step_way']}; max |param difference| from eager {diff:.2e}")
    return 0


if __name__ == "__main__":
    run_script(main)
