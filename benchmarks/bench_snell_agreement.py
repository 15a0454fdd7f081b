"""Benchmark: where ``attn-dyn agreement`` (one Snell Table 2 row) spends its time, by phase.

Runs :func:`minimal_attn.backends.snell.agreement.run_agreement` once with timers
around its phases (exclusive seconds: a phase's time excludes the phases inside
it) and prints them. With ``--reference-commit SHA`` the same row is first run
by the code of that commit (exported with ``git archive`` into a temporary
folder and run in a child process) and the table shows both, with the ratio
old / new per phase: the before/after of the same configuration in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_snell_agreement.py --dataset sst2 --steps 100 \
        [--reference-commit b01c497] [--max-train N] [--max-val N] [--device cpu|cuda]

``--train-steps-only`` times training steps alone (batch, forward, backward, Adam), the
route before issue 19 against today's, alternating step by step in one process (their
parameters must come out equal). ``--profile`` adds where today's step spends its time:
the loop's pace, the host's time per part, the card's busy time, the operators, kernels
and host waits per part (``snell_profile.py``, whose docstring says how to read it).

On a GPU (the paper's widths; a few minutes on an H100 for SST-2):

    python benchmarks/bench_snell_agreement.py --dataset sst2 --device cuda --steps 1000
    python benchmarks/bench_snell_agreement.py --dataset multi30k --device cuda --steps 2000

The ``host`` column marks phases that stay on the CPU whatever the device (reading
and tokenising, Python per batch, the logistic proxy's L-BFGS, the metrics, the
files); on a GPU the per-step phases (batches, forward, backward, optimizer) are
the host's launch time, and ``train (all)`` is the wall time of the training loops.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

from _options import ArgumentParser, count  # beside this file (benchmarks/)

HERE = os.path.dirname(os.path.abspath(__file__))
#: (module, attribute, phase, stays on the host whatever the device)
TARGETS = [
    ("minimal_attn.backends.snell.agreement", "load_text_task", "load and tokenise", True),
    ("minimal_attn.backends.snell.agreement", "train_seq", "train: loop (Python per step)", True),
    ("minimal_attn.backends.snell.train", "loss_on_batch", "train: forward", False),
    ("minimal_attn.backends.snell.train", "batch_loss", "train: forward", False),
    ("minimal_attn.backends.snell.eval", "pad_batch", "batches", True),
    ("minimal_attn.backends.snell.batches:SplitTensors", "batch", "batches", True),
    ("torch:Tensor", "backward", "train: backward", False),
    ("minimal_attn.backends.snell.train", "optimizer_step", "train: optimizer", False),
    ("minimal_attn.backends.snell.train", "evaluate", "evaluate: forward and probes", False),
    ("minimal_attn.backends.snell.eval", "_saliency", "evaluate: saliency", False),
    ("minimal_attn.backends.snell.seq_models:Seq2Seq", "greedy", "evaluate: greedy", False),
    ("minimal_attn.backends.snell.eval", "corpus_bleu", "evaluate: BLEU", True),
    ("minimal_attn.backends.snell.train", "write_checkpoint", "checkpoints, eval files", True),
    ("minimal_attn.backends.snell.train", "save_rows", "checkpoints, eval files", True),
    ("minimal_attn.backends.snell.agreement", "load_run", "read runs back", True),
    ("minimal_attn.proxy", "train_proxy", "proxy: fit", False),
    ("minimal_attn.backends.snell.agreement", "_proxy_rows", "proxy: beta^px rows", False),
    ("minimal_attn.logistic_proxy", "fit_logistic_sweep", "logistic proxy: fit", True),
    ("minimal_attn.backends.snell.agreement", "_logistic_rows", "logistic: rows", True),
    ("minimal_attn.backends.snell.agreement", "assemble", "agreement metrics", True),
    ("minimal_attn.backends.snell.agreement", "_write_outputs", "tables and plot", True),
]
TRAIN = ("train: loop (Python per step)", "train: forward", "train: backward",
         "train: optimizer", "batches [train]")


class Phases:
    """Exclusive wall seconds per phase, from wrappers that nest."""

    def __init__(self, sync):
        self.seconds, self.calls, self.stack, self.sync = defaultdict(float), \
            defaultdict(int), [], sync

    def wrap(self, fn, name, coarse):
        def timed(*args, **kwargs):
            key = name
            if name == "batches":
                key += " [eval]" if any(s[0].startswith("evaluate") for s in self.stack) \
                    else " [train]"
            if coarse:
                self.sync()
            t0 = time.perf_counter()
            self.stack.append([key, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                if coarse:
                    self.sync()
                dt = time.perf_counter() - t0
                _, inner = self.stack.pop()
                self.seconds[key] += dt - inner
                self.calls[key] += 1
                if self.stack:
                    self.stack[-1][1] += dt
        return timed


def _install(phases):
    import importlib

    hosts = {}
    for target, attr, name, host in TARGETS:
        module, _, cls = target.partition(":")
        try:
            owner = importlib.import_module(module)
        except ModuleNotFoundError:
            continue                     # a module the code under test does not have
        owner = getattr(owner, cls) if cls else owner
        if not hasattr(owner, attr):
            continue                     # a phase the code under test does not have
        coarse = name in ("train: loop (Python per step)", "evaluate: forward and probes",
                          "proxy: fit", "logistic proxy: fit")
        setattr(owner, attr, phases.wrap(getattr(owner, attr), name, coarse))
        hosts[name] = host
    return hosts


def _run(args):
    import torch

    from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    phases = Phases(sync)
    hosts = _install(phases)
    task = "classify" if args.dataset == "sst2" else "translate"
    extra = {"emb": args.emb} if args.emb else {}
    if task == "translate":
        extra.update(vocab_size=args.vocab_size, out_hidden=args.hidden)
    config = AgreementConfig(task=task, dataset=args.dataset, steps=args.steps,
                             data_dir=args.data_dir or os.path.join(
                                 HERE, "..", "..", "shared", "data", args.dataset),
                             hidden=args.hidden, max_train=args.max_train, max_val=args.max_val,
                             eval_every=args.eval_every, proxy_epochs=args.proxy_epochs,
                             device=args.device, **extra)
    out = tempfile.mkdtemp(prefix="bench_snell_")
    try:
        t0 = time.perf_counter()
        root = phases.wrap(lambda: run_agreement(config, out), "other", True)
        root()
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    seconds = dict(phases.seconds)
    return {"wall": wall, "seconds": seconds, "calls": dict(phases.calls),
            "host": {k: hosts.get(k.split(" [")[0], True) for k in seconds},
            "steps": args.steps * (4 if task == "classify" else 3),
            "code": os.path.dirname(os.path.dirname(__import__("minimal_attn").__file__))}


def _task_and_config(args):
    """The task (``args.dataset``, read as the row reads it) and the resolved model config."""
    from minimal_attn.backends.snell.train import SeqTrainConfig
    from minimal_attn.datasets.seq import load_text_task

    kind = "classify" if args.dataset == "sst2" else "translate"
    task = load_text_task(kind, args.dataset, args.data_dir or os.path.join(
        HERE, "..", "..", "shared", "data", args.dataset), args.max_train, args.max_val,
        args.vocab_size)
    return task, SeqTrainConfig(task=kind, hidden=args.hidden, out_hidden=args.hidden,
                                emb=args.emb, device=args.device).resolved()


def _step_times(args, task, c):
    """Seconds per training step (batch, forward, backward, Adam) at the configured widths:
    the readable route (a batch padded from Python lists, torch's packing, Adam one tensor at
    a time; the code before issue 19) against the loop's (a batch cut from the padded split,
    Adam foreach), alternating, with the same batches."""
    import numpy as np
    import torch

    from minimal_attn.backends.snell import seq_models
    from minimal_attn.backends.snell.batches import SplitTensors
    from minimal_attn.backends.snell.eval import batch_loss, loss_on_batch
    from minimal_attn.backends.snell.train import batch_indices, build_model

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    split = SplitTensors(task, task.train_src, task.train_tgt, args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def torch_encode(lstm, emb, lengths):          # the packing before issue 19
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, state = lstm(packed)
        return pad_packed_sequence(out, batch_first=True, total_length=emb.shape[1])[0], state

    fast_encode, times = seq_models._encode, {"old": [], "new": []}
    models, rng = {}, {}
    # each route its own dropout stream, the same in both: the generator of the device
    get_rng, set_rng = ((torch.cuda.get_rng_state, torch.cuda.set_rng_state)
                        if args.device == "cuda" else (torch.get_rng_state, torch.set_rng_state))
    for route in ("old", "new"):
        torch.manual_seed(0)
        model = build_model(task, c).to(args.device)
        opt = torch.optim.Adam(model.parameters(), lr=c.lr, foreach=route == "new")
        models[route], rng[route] = (model, opt), get_rng()
    for step in range(args.steps + 2):                  # two warm-up steps
        idx = batch_indices(step, c.batch_size, len(task.train_src), 0)
        for route in ("old", "new"):
            model, opt = models[route]
            set_rng(rng[route])
            seq_models._encode = torch_encode if route == "old" else fast_encode
            sync()
            t0 = time.perf_counter()
            if route == "old":
                loss = loss_on_batch(model, task, [task.train_src[i] for i in idx],
                                     [task.train_tgt[i] for i in idx], args.device)
            else:
                loss = batch_loss(model, task, split.batch(idx))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sync()
            rng[route] = get_rng()
            if step >= 2:
                times[route].append(time.perf_counter() - t0)
    seq_models._encode = fast_encode
    gap = max(float((a.double() - b.double()).abs().max()) for a, b in zip(
        models["old"][0].state_dict().values(), models["new"][0].state_dict().values()))
    old, new = np.mean(times["old"]), np.mean(times["new"])
    print(f"{args.dataset}: hidden {c.hidden}, emb {c.emb}, batch {c.batch_size}, "
          f"{task.n_vocab} ids, device {args.device}, {args.steps} steps")
    print(f"old route {1e3 * old:.1f} ms/step, new {1e3 * new:.1f} ms/step, old/new "
          f"{old / new:.2f}x; parameters after the steps: max |old - new| {gap:.2g} (lr "
          f"{c.lr:g}; 0 is bit for bit, which a card's kernels need not give)")


def _reference(args, commit):
    """The same benchmark run by the code of ``commit`` in a child process."""
    tree = tempfile.mkdtemp(prefix="bench_snell_ref_")
    try:
        archive = subprocess.run(["git", "-C", os.path.join(HERE, ".."), "archive", commit,
                                  "minimal_attn", "backends", "cli"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        for sub in ("backends", "cli"):            # installed layout: minimal_attn.backends
            os.rename(os.path.join(tree, sub), os.path.join(tree, "minimal_attn", sub))
        result = os.path.join(tree, "result.json")
        argv = [a for a in sys.argv[1:]]
        i = argv.index("--reference-commit")
        del argv[i:i + 2]
        env = dict(os.environ, PYTHONPATH=tree)
        subprocess.run([sys.executable, os.path.abspath(__file__)] + argv + ["--json", result],
                       check=True, env=env)
        with open(result) as f:
            ref = json.load(f)
        if not ref["code"].startswith(tree):
            raise SystemExit(f"the reference ran {ref['code']}, not the exported {tree}")
        return ref
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def _table(new, ref=None):
    names = sorted(set(new["seconds"]) | set(ref["seconds"] if ref else ()),
                   key=lambda k: -max(new["seconds"].get(k, 0), (ref or new)["seconds"].get(k, 0)))
    head = f"{'phase':34s} {'host':>5s}" + (f" {'old s':>9s}" if ref else "") + f" {'new s':>9s}"
    print(head + ("   old/new" if ref else ""))
    rows = names + ["train (all)", "total"]
    def seconds(r, k):
        if k == "train (all)":
            return sum(v for n, v in r["seconds"].items() if n in TRAIN)
        return r["wall"] if k == "total" else r["seconds"].get(k, 0.0)

    for k in rows:
        def get(r, k=k):
            return seconds(r, k)
        host = "" if k in ("train (all)", "total") else \
            ("yes" if new["host"].get(k, (ref or new)["host"].get(k, True)) else "no")
        line = f"{k:34s} {host:>5s}" + (f" {get(ref):9.2f}" if ref else "") + f" {get(new):9.2f}"
        if ref:
            line += f" {get(ref) / get(new):8.2f}x" if get(new) > 0 else "        -"
        print(line)
    for label, r in (("old", ref), ("new", new)):
        if r is None:
            continue
        train = sum(v for n, v in r["seconds"].items() if n in TRAIN)
        host = sum(v for n, v in r["seconds"].items() if r["host"].get(n, True))
        print(f"{label}: {train / r['steps'] * 1e3:.1f} ms per training step "
              f"({r['steps']} steps over the models); host-side phases {host:.1f} s = "
              f"{100 * host / r['wall']:.0f}% of {r['wall']:.1f} s")


def main(argv=None):
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="sst2", choices=["sst2", "multi30k"])
    p.add_argument("--data-dir", default=None, help="[../shared/data/DATASET]")
    p.add_argument("--steps", type=count(), default=100, help="Adam steps per model")
    p.add_argument("--hidden", type=count(), default=256)
    p.add_argument("--emb", type=count(), default=None)
    p.add_argument("--vocab-size", type=count(), default=8000)
    p.add_argument("--max-train", type=count(), default=None)
    p.add_argument("--max-val", type=count(), default=None)
    p.add_argument("--eval-every", type=count(), default=None)
    p.add_argument("--proxy-epochs", type=count(), default=5)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=count(), default=1)
    p.add_argument("--reference-commit", default=None,
                   help="also run the code of this commit first, and print old / new")
    p.add_argument("--json", default=None, help="write the phase seconds here")
    p.add_argument("--train-steps-only", action="store_true",
                   help="only time training steps, old route against new, alternating")
    p.add_argument("--profile", action="store_true",
                   help="with --train-steps-only: then profile today's step, part by part")
    args = p.parse_args(argv)
    if args.profile and not args.train_steps_only:
        from minimal_attn.errors import InputError

        raise InputError("--profile profiles training steps: add --train-steps-only",
                         param="profile")
    if args.train_steps_only:
        task, c = _task_and_config(args)
        _step_times(args, task, c)
        if args.profile:
            from snell_profile import profile_seq_step  # beside this file (benchmarks/)

            profile_seq_step(task, c, args.device, steps=min(args.steps, 50))
        return 0
    ref = _reference(args, args.reference_commit) if args.reference_commit else None
    new = _run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(new, f)
        return 0
    print(f"{args.dataset}, {args.steps} steps per model, device {args.device}, "
          f"{args.threads} thread(s)")
    _table(new, ref)
    return 0


if __name__ == "__main__":
    try:
        from minimal_attn.cli.main import run_script
    except ImportError:      # the child of --reference-commit runs an older tree's package
        sys.exit(main())
    run_script(main)
