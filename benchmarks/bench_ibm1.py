"""Benchmark: IBM Model 1 EM (minimal_attn.ibm1) against NLTK's IBMModel1 on Multi30k.

Run from the repository root (not a test; it prints times and a ratio):

    python benchmarks/bench_ibm1.py                       # 29,000 pairs, 5 iterations
    python benchmarks/bench_ibm1.py --pairs 5000 --skip-check
    python benchmarks/bench_ibm1.py --device cuda --skip-nltk   # the same EM on a GPU

With ``--device cuda`` the same sparse EM also runs on the GPU (CuPy if it is
installed, else torch CUDA tensors through the array namespace; ``--gpu-lib``
picks) and is timed against the NumPy run; the two tables must agree to 1e-9.

Both sides see the same pairs: source = English (NLTK's ``mots``), target =
German (NLTK's ``words``), whitespace-split lower-cased words, the NULL word
on, 5 EM iterations from the uniform table t(o|i) = 1/|O| (NLTK's own start).
Times include building the vocabulary / index arrays on our side and the
``AlignedSent`` objects on NLTK's. NLTK's constructor also Viterbi-aligns every
pair after training (``align_all``); the ratio uses NLTK's training alone
(``align_all`` skipped), the fairer and smaller figure.

Equality check. NLTK normalises the posterior of a target word by
``total_count[t]``, a sum over the *occurrences* of t in the sentence, so a
word that appears twice in a target sentence gets half the count per
occurrence: NLTK counts it once per sentence, Brown et al. (and this package)
once per occurrence. The tables therefore agree only on corpora where no
target word repeats within a sentence; the check trains both on exactly those
pairs and compares every co-occurring entry. NLTK also floors probabilities at
1e-12 (``IBMModel.MIN_PROB``), far below the 1e-9 tolerance.
"""

import contextlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _options import ArgumentParser, count  # noqa: E402  (beside this file: benchmarks/)

from minimal_attn.cli.main import run_script  # noqa: E402
from minimal_attn.datasets.text import Vocab, read_parallel, whitespace_tokens  # noqa: E402
from minimal_attn.errors import InputError, check_folder  # noqa: E402
from minimal_attn.ibm1 import train_ibm1  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "multi30k"


def ours(src, tgt, iterations, xp=None, context=contextlib.nullcontext):
    """Vocabulary, encoding, index arrays and EM: everything from token lists."""
    import numpy as np

    vs, vt = Vocab.build(src, unk=False), Vocab.build(tgt, unk=False)
    with context():
        model = train_ibm1(vs.encode_all(src), vt.encode_all(tgt), len(vs), len(vt),
                           iterations=iterations, null=True, xp=np if xp is None else xp)
    return model, vs, vt


def gpu_namespace(choice):
    """(module, device context, name) of the GPU array library, or exit with the reason."""
    from minimal_attn._xp import cupy_available

    ok, reason = cupy_available()
    if choice in ("auto", "cupy") and ok:
        import cupy

        return cupy, contextlib.nullcontext, "cupy"
    if choice == "cupy":
        raise InputError(f"--gpu-lib cupy: {reason}")
    import torch

    if not torch.cuda.is_available():
        raise InputError("--device cuda: neither CuPy nor torch CUDA can reach a GPU"
                         + (f" ({reason})" if reason else "") + "; use --device cpu")
    return torch, lambda: torch.device("cuda"), "torch cuda"


def gpu_comparison(src, tgt, iterations, repeats, t_cpu, choice):
    """Time the EM on the GPU, check it against the NumPy table, print the ratio."""
    import numpy as np

    xp, context, name = gpu_namespace(choice)
    ours(src[:100], tgt[:100], 1, xp, context)                  # warm-up: kernels, allocator
    runs = [timed(ours, src, tgt, iterations, xp, context)[1] for _ in range(repeats)]
    print(f"GPU ({name:10s}): {min(runs):8.2f} s  (best of {repeats})")
    print(f"ratio             : {t_cpu / min(runs):8.1f} x faster than NumPy on the CPU")
    (cpu, _, _), (gpu, _, _) = ours(src, tgt, iterations), ours(src, tgt, iterations, xp, context)
    worst = float(np.max(np.abs(cpu.entries()[2] - gpu.entries()[2])))
    print(f"GPU vs CPU tables : max |diff| = {worst:.3e} ({'OK' if worst <= 1e-9 else 'FAIL'})")
    return worst <= 1e-9


def nltk_model(src, tgt, iterations, align):
    """NLTK's IBMModel1; ``align=False`` skips its final Viterbi alignment pass."""
    from nltk.translate import AlignedSent, IBMModel1

    class TrainOnly(IBMModel1):
        def align_all(self, parallel_corpus):
            pass

    corpus = [AlignedSent(t, s) for s, t in zip(src, tgt)]   # words = target, mots = source
    return (IBMModel1 if align else TrainOnly)(corpus, iterations)


def timed(f, *args):
    t0 = time.perf_counter()
    out = f(*args)
    return out, time.perf_counter() - t0


def max_abs_diff(model, vs, vt, nltk):
    """Max |t_ours - t_nltk| over every co-occurring (source, target) entry."""
    s, t, p = model.entries()
    table = nltk.translation_table
    worst = 0.0
    for i, o, q in zip(s.tolist(), t.tolist(), p.tolist()):
        src_word = None if i == model.null_id else vs.itos[i]
        worst = max(worst, abs(table[vt.itos[o]][src_word] - q))
    return worst, len(p)


def main():
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="Multi30k folder (train.en/.de)")
    ap.add_argument("--pairs", type=count(), default=None, help="first N pairs (default: all)")
    ap.add_argument("--iterations", type=count(), default=5)
    ap.add_argument("--repeats", type=count(), default=3, help="best of N runs for our timing")
    ap.add_argument("--skip-nltk", action="store_true")
    ap.add_argument("--skip-check", action="store_true", help="skip the equality check")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: also time the EM on the GPU against the NumPy run")
    ap.add_argument("--gpu-lib", default="auto", choices=["auto", "cupy", "torch"])
    ap.add_argument("--show-repeats", action="store_true",
                    help="also compare on all pairs, to show what repeated target words do")
    args = ap.parse_args()

    check_folder(args.data, "Multi30k folder", param="data",
                 hint="pass --data (a folder with train.en and train.de)")
    if args.device == "cuda":
        gpu_namespace(args.gpu_lib)             # no GPU: refused before anything is timed
    src, tgt = read_parallel(os.path.join(args.data, "train.en"),
                             os.path.join(args.data, "train.de"), whitespace_tokens)
    if args.pairs is not None:
        src, tgt = src[:args.pairs], tgt[:args.pairs]
    print(f"{len(src)} pairs (en -> de), {args.iterations} EM iterations, NULL on")

    runs = [timed(ours, src, tgt, args.iterations)[1] for _ in range(args.repeats)]
    t_ours = min(runs)
    print(f"minimal_attn.ibm1 : {t_ours:8.2f} s  (best of {args.repeats}; first run "
          f"{runs[0]:.2f} s, paying for fresh memory pages)")
    if args.device == "cuda" and not gpu_comparison(src, tgt, args.iterations, args.repeats,
                                                     t_ours, args.gpu_lib):
        return 1                        # the GPU's table differs from the NumPy one
    if not args.skip_nltk:
        try:
            import nltk  # noqa: F401
        except ImportError:
            print("NLTK is not installed: pip install nltk for the comparison")
            return
        _, t_train = timed(nltk_model, src, tgt, args.iterations, False)
        print(f"NLTK IBMModel1    : {t_train:8.2f} s  (training only)")
        print(f"ratio             : {t_train / t_ours:8.1f} x faster "
              f"({t_train / runs[0]:.1f} x against our first run)")

    if not args.skip_check and not args.skip_nltk:
        keep = [n for n in range(len(tgt)) if len(set(tgt[n])) == len(tgt[n])]
        s2, t2 = [src[n] for n in keep], [tgt[n] for n in keep]
        model, vs, vt = ours(s2, t2, args.iterations)
        worst, n = max_abs_diff(model, vs, vt, nltk_model(s2, t2, args.iterations, False))
        print(f"equality check on the {len(keep)} pairs with no repeated target word: "
              f"max |t_ours - t_nltk| = {worst:.3e} over {n} entries "
              f"({'OK' if worst <= 1e-9 else 'FAIL'} at 1e-9)")
        repeated = len(src) - len(keep)
        if repeated and args.show_repeats:
            full, vs, vt = ours(src, tgt, args.iterations)
            worst_all, _ = max_abs_diff(full, vs, vt,
                                        nltk_model(src, tgt, args.iterations, False))
            print(f"on all pairs ({repeated} with a repeated target word) the tables differ by "
                  f"up to {worst_all:.3e}: NLTK counts a repeated target word once per sentence")


if __name__ == "__main__":
    run_script(main)
