"""Benchmark: the default fixed-focus figure (Figures 2-3), vectorised vs a naive per-alpha loop.

The vectorised run is ``fixed_focus_curves`` with ``LinearFixedFocusModel``
(all alphas at once, exact compression of segments and mosaics), plus the
closed-form overlay. The naive baseline trains one ``fcam`` parameter dict per
alpha with ``fcam.loss_and_grad`` and evaluates the loss at alpha and alpha'
with ``fcam.loss`` every epoch, as a straightforward script would. The naive
loop costs about a second per epoch here, so it runs ``--naive-epochs`` epochs
and is extrapolated linearly to ``--epochs`` (its cost per epoch is constant);
``--full-naive`` runs it all. Both runs must give the same losses, checked.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fixed_focus.py [--epochs 1000] [--naive-epochs 5]

(one BLAS thread: on a shared 2-core machine, BLAS threads spinning against other
jobs make the naive loop's times noisy.)
"""

import time

import numpy as np
from _options import ArgumentParser, count, positive  # beside this file (benchmarks/)

from minimal_attn import data, fcam
from minimal_attn import fixed_focus as ff
from minimal_attn.cli.main import run_script
from minimal_attn.losses import LOSS_PARADIGMS

ALPHAS = [0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0]


def vectorised(pop, m, n_classes, epochs, lr):
    model = ff.LinearFixedFocusModel(pop.X, pop.y, n_classes)
    res = ff.fixed_focus_curves(model, pop.z, m, ALPHAS, LOSS_PARADIGMS, epochs, lr)
    for p in res:
        ff.closed_form_curves(p, ALPHAS, epochs, lr, n_classes)
    return res


def naive(pop, m, n_classes, epochs, lr, delta=0.01):
    """One alpha at a time with fcam: the loop the vectorised model replaces."""
    res = {}
    for p in LOSS_PARADIGMS:
        res[p] = {}
        for alpha in ALPHAS:
            la = data.fixed_log_attention(pop.z, m, alpha)
            la_up = data.fixed_log_attention(pop.z, m, min(alpha + delta, 1.0))
            params = fcam.init_params(pop.X.shape[2], n_classes)
            loss, incentive = [], []
            for _ in range(epochs + 1):
                value, grads = fcam.loss_and_grad(params, pop.X, pop.y, p, la)
                loss.append(value)
                incentive.append(value - fcam.loss(params, pop.X, pop.y, p, la_up))
                params = {key: params[key] - lr * grads[key] for key in params}
            res[p][alpha] = {"loss": np.array(loss), "incentive": np.array(incentive)}
    return res


def timed(fn, *args):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=count(2), default=20)
    parser.add_argument("--classes", type=count(2), default=20)
    parser.add_argument("--epochs", type=count(), default=1000)
    parser.add_argument("--lr", type=positive, default=5.0)
    parser.add_argument("--naive-epochs", type=count(), default=5)
    parser.add_argument("--full-naive", action="store_true")
    args = parser.parse_args()
    pop = data.exact_population(args.m, args.classes)
    print(f"default figure: 3 paradigms x {len(ALPHAS)} alphas, C = {args.classes}, "
          f"m = {args.m}, N = {pop.X.shape[0]} mosaics, {args.epochs} epochs")

    fast, wall, cpu = timed(vectorised, pop, args.m, args.classes, args.epochs, args.lr)
    print(f"vectorised (curves + closed form): wall {wall:7.2f} s   cpu {cpu:7.2f} s")

    n = args.epochs if args.full_naive else min(args.naive_epochs, args.epochs)
    slow, n_wall, n_cpu = timed(naive, pop, args.m, args.classes, n, args.lr)
    scale = args.epochs / max(n, 1)
    for p in slow:
        for a in ALPHAS:
            np.testing.assert_allclose(slow[p][a]["loss"], fast[p][a]["loss"][:n + 1],
                                       rtol=1e-9)
            np.testing.assert_allclose(slow[p][a]["incentive"],
                                       fast[p][a]["incentive"][:n + 1], atol=1e-12)
    how = "measured" if n == args.epochs else f"{n} epochs measured, x{scale:g} extrapolated"
    print(f"naive per-alpha fcam loop ({how}): wall {n_wall * scale:7.1f} s   "
          f"cpu {n_cpu * scale:7.1f} s")
    print(f"ratio naive / vectorised: wall {n_wall * scale / wall:6.0f}x   "
          f"cpu {n_cpu * scale / cpu:6.0f}x   (same losses: checked)")


if __name__ == "__main__":
    run_script(main)
