"""Training-step throughput of the CNN FCAM: batched segments vs a per-segment loop.

One training step = forward of focus and classifier on a batch of mosaics,
the paradigm's loss, backward, and an SGD-with-momentum update, with the
CIFAR-10 networks of Appendix A.2 (``minimal_attn.backends.vr.models``).

* **batched**: :class:`FCAM` reshapes the B*m segments to (B*m, 3, 32, 32)
  and runs each network on chunks of ``--chunk`` images (default: the
  model's device default, the whole batch on a GPU);
* **loop (NCHW)**: the baseline, a plain Python loop with one focus call and
  one classifier call per segment position j on (B, 3, 32, 32) images in
  torch's default layout;
* **loop (channels-last)**: the same loop in the layout FCAM uses, to show
  how much of the gain is the layout and how much the batching.

All variants time the same networks (same weights), data and loss. Rounds
alternate between variants so a noisy shared machine hurts all alike; the
best round of each is reported (least disturbed), with the median beside it,
and the ratio is best vs best against the plain loop.

    python benchmarks/bench_cnn_throughput.py                 # m=5, batch 100, HA
    python benchmarks/bench_cnn_throughput.py --chunk 25,50,100,500 --paradigm lv
    python benchmarks/bench_cnn_throughput.py --device cuda --steps 50
"""

import argparse
import statistics
import time

import torch
from _options import ArgumentParser, count  # beside this file (benchmarks/)

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.models import CPU_CHUNK, build_fcam
from minimal_attn.cli.main import run_script
from minimal_attn.losses import LOSS_PARADIGMS


def loop_forward(model, X, paradigm, layout):
    """The baseline: one network call per segment position, no reshaping."""
    m = X.shape[1]
    segs = [X[:, j].contiguous(memory_format=layout) for j in range(m)]        # m x (B, 3, 32, 32)
    scores = torch.cat([model.focus(x) for x in segs], dim=1)                  # (B, m)
    if paradigm == "sa":
        x_tilde = torch.einsum("bm,bmchw->bchw", tb.attention(scores), X)
        return scores, model.classifier(x_tilde.contiguous(memory_format=layout))  # (B, C)
    return scores, torch.stack([model.classifier(x) for x in segs], 1)         # (B, m, C)


def make_step(model, X, y, paradigm, layout=None, lr=0.01):
    """A training step: batched FCAM if ``layout`` is None, else the loop in ``layout``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def step():
        scores, logits = (model(X, paradigm) if layout is None
                          else loop_forward(model, X, paradigm, layout))
        loss = tb.loss(paradigm, scores, logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def mosaics_per_second(step, steps, batch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return batch * steps / (time.perf_counter() - start)


def chunks(text):
    """``--chunk``'s type: comma-separated chunk sizes >= 1 (none or all: the device's
    default)."""
    try:
        sizes = [None if c.strip() in ("none", "all") else int(c) for c in text.split(",")]
    except ValueError:
        sizes = [0]
    if any(size is not None and size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"must be chunk sizes >= 1 (or none), "
                                         f"comma-separated, got {text!r}")
    return sizes


def main():
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=count(2), default=5)
    parser.add_argument("--batch", type=count(), default=100)
    parser.add_argument("--paradigm", default="ha", choices=LOSS_PARADIGMS)
    parser.add_argument("--chunk", type=chunks, default=[None],
                        help="comma-separated chunk sizes for the batched model "
                             "(default: the device default)")
    parser.add_argument("--steps", type=count(), default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=count(), default=5)
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:K")
    args = parser.parse_args()
    device = tb.get_device(args.device)          # e.g. --device cuda without a GPU: refused
    torch.manual_seed(0)
    X = torch.randn(args.batch, args.m, 3, 32, 32, device=device)              # (B, m, 3, 32, 32)
    y = torch.randint(0, 3, (args.batch,), device=device)
    plain = build_fcam(device=device).to(memory_format=torch.contiguous_format)
    variants = {"loop (NCHW)": make_step(plain, X, y, args.paradigm, torch.contiguous_format),
                "loop (channels-last)": make_step(build_fcam(device=device), X, y,
                                                  args.paradigm, torch.channels_last)}
    for c in args.chunk:
        model = build_fcam(device=device, chunk=c)
        size = model._chunk_size(args.batch * args.m, device)
        variants[f"batched chunk={size}"] = make_step(model, X, y, args.paradigm)

    for step in variants.values():                                            # warm up
        step()
        step()
    rates = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, step in variants.items():
            rates[name].append(mosaics_per_second(step, args.steps, args.batch, device))

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {device} ({name}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, CPU_CHUNK default {CPU_CHUNK}")
    print(f"paradigm {args.paradigm}, m={args.m}, batch {args.batch}, CIFAR-10 CNNs "
          f"(Appendix A.2), {args.rounds} rounds x {args.steps} steps")
    base = max(rates["loop (NCHW)"])
    print(f"{'variant':<24}{'best mosaics/s':>16}{'median':>10}{'ratio vs loop (NCHW)':>22}")
    for name, values in rates.items():
        print(f"{name:<24}{max(values):>16.1f}{statistics.median(values):>10.1f}"
              f"{max(values) / base:>22.2f}")


if __name__ == "__main__":
    run_script(main)
