r"""The two moves of capturing a whole training step in a CUDA graph, shared by the trainers.

Run eagerly, every operator of a step is one launch from the host; a small model
(the seed-batched LSTMs of Snell's synthetic tasks, the CNN FCAM at 12 seeds) then
keeps the card waiting on Python. A CUDA graph records the step's kernels once and
replays them with one call. torch's recipe for a whole network
(``torch.cuda.graphs`` in the PyTorch docs) asks for a few eager steps on a side
stream first (lazy allocations, cuDNN autotuning, the optimizer's state), then the
capture, with the gradients set to None so the graph allocates them itself. The
trainers keep their own bookkeeping (static inputs, when to capture);
:mod:`.vr.batched_step` and :mod:`.snell.synthetic_graph` use these two.
"""

import torch


def on_side_stream(fn, device, stream=None):
    """Run ``fn()`` on ``stream`` (a new one on ``device`` when None), ordered after the
    work already queued on the current stream and before the work queued after it;
    returns the stream, to be reused."""
    current = torch.cuda.current_stream(device)
    stream = torch.cuda.Stream(device=device) if stream is None else stream
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        fn()
    current.wait_stream(stream)
    return stream


def record(fn):
    """``fn``'s kernels recorded (not run) in a new ``torch.cuda.CUDAGraph``; raises the
    RuntimeError torch gives when something in ``fn`` cannot be captured (a host
    synchronisation, a CPU tensor)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph
