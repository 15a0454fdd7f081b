"""Benchmark: one evaluation of a Snell translation model, batches in the split's order
against batches of like lengths (``backends.snell.eval.length_order``).

Run from the repository root (not a test; it prints times and their ratio):

    python benchmarks/bench_snell_eval.py                      # 300 Multi30k pairs, 1 thread
    python benchmarks/bench_snell_eval.py --n-val 1014 --attention learned --delta

A model at the paper's widths (A.8: hidden 256, N 256, SentencePiece 8,000), at its
initialisation (the cost does not depend on the weights), evaluates the first
``--n-val`` validation pairs with the probe beta (Snell Eq. (4): all 8,000 outputs at every
(t, l) of every batch, padding included), as the uniform model does at each of its
evaluations; ``--delta`` adds the saliency. Both orders run in one process, alternating,
and must give the same rows.
"""

import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _options import ArgumentParser, count  # noqa: E402  (beside this file: benchmarks/)

from minimal_attn.backends.snell import eval as ev  # noqa: E402
from minimal_attn.backends.snell.batches import SplitTensors  # noqa: E402
from minimal_attn.backends.snell.config import SeqTrainConfig  # noqa: E402
from minimal_attn.backends.snell.train import build_model  # noqa: E402
from minimal_attn.cli.main import run_script  # noqa: E402
from minimal_attn.datasets.seq import load_text_task  # noqa: E402


def main():
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    ap.add_argument("--n-val", type=count(), default=300)
    ap.add_argument("--attention", default="uniform", choices=["learned", "uniform"])
    ap.add_argument("--delta", action="store_true", help="also the saliency Delta")
    ap.add_argument("--threads", type=count(), default=1)
    ap.add_argument("--rounds", type=count(), default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    task = load_text_task("translate", "multi30k", args.data_dir, max_val=args.n_val)
    model = build_model(task, SeqTrainConfig(task="translate", attention=args.attention)
                        .resolved())
    split = SplitTensors(task, task.val_src, task.val_tgt, "cpu")
    n = len(split)
    sizes = ev._target_lengths(split, n) * split.src_len[:n]
    for name, order in (("split order", np.arange(n)),
                        ("like lengths", ev.length_order(split, n))):
        padded = sum(len(b) * split.src_len[b].max() * split.tgt_len[b].max()
                     for b in np.array_split(order, range(32, n, 32)))
        print(f"{name}: the batches hold {padded / sizes.sum():.2f}x the (t, l) positions "
              "of their sentences")

    def run():
        t0 = time.perf_counter()
        out = ev.evaluate(model, task, split, want_beta=True, want_delta=args.delta)
        return time.perf_counter() - t0, out

    best = {"split order": np.inf, "like lengths": np.inf}
    for _ in range(args.rounds):
        with mock.patch.object(ev, "length_order", lambda split, n: np.arange(n)):
            seconds, before = run()
        best["split order"] = min(best["split order"], seconds)
        seconds, after = run()
        best["like lengths"] = min(best["like lengths"], seconds)
    for key in ("alpha", "beta") + (("delta",) if args.delta else ()):
        worst = max(float(np.abs(a - b).max()) for a, b in zip(before[key], after[key]))
        print(f"max |{key} difference| {worst:.1e}")
    print(f"{n} pairs, {args.attention} model, {args.threads} thread(s), best of {args.rounds}: "
          f"split order {best['split order']:.1f} s, like lengths {best['like lengths']:.1f} s, "
          f"ratio {best['split order'] / best['like lengths']:.2f}x")

if __name__ == "__main__":
    run_script(main)
