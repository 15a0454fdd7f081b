r"""One training step of :class:`.batched_train.BatchedSeeds`, eager, compiled or as a CUDA graph.

Vashisht & Ramaswamy (2023), Appendix A.2 (the CNN FCAM's step, 12 seeds per
Table 1 cell). A step is: gather the batch, forward with the per-seed losses and
bookkeeping, backward, optimizer update. Run eagerly, each of its operators is
one launch from the host; at 12 seeds x 100 mosaics the card waits on the host
(``benchmarks/README.md``). ``TrainConfig.compile`` picks how it runs:

* ``none`` (default): eagerly, operator by operator.
* ``compile``: the forward (its backward comes with it) and the optimizer update
  through ``torch.compile`` (inductor: fused elementwise kernels; also on the CPU).
  The numbers equal eager ones to float rounding, not bit for bit: fused kernels
  round in another order (tests/test_batched_step.py bounds the difference).
* ``cudagraph`` (CUDA only): the whole step, forward, backward and update, is
  captured once per (phases, batch shape) in a CUDA graph and replayed; each
  step then costs the host a copy of the batch's indices into the graph's static
  input, the optimizer's per-seed factors (sent before the replay) and one
  replay. Each shape first runs :data:`WARMUP` eager steps on a side stream
  (cuDNN autotuning, lazy allocations), as torch's whole-network capture needs.
  The arithmetic is the eager step's, so the numbers are too.

``TrainConfig.precision`` picks the arithmetic, with any of the three
(:func:`precision_scope` around a whole epoch or evaluation, :func:`autocast`
around each network call):

* ``fp32`` (default): PyTorch's defaults. On CUDA that means cuDNN convolutions
  in TF32 already (``torch.backends.cudnn.allow_tf32`` is True by default) and
  matmuls (the fully connected layers) in IEEE float32.
* ``tf32`` (CUDA only): the matmuls in TF32 as well, for the epoch or evaluation
  only; the previous global setting comes back afterwards.
* ``bf16``: the networks' forwards (and so their backwards) under bfloat16
  autocast; :class:`.batched.BatchedFCAM` hands back float32 scores and logits,
  so every softmax, loss, per-seed reduction and statistic that decides a
  metric runs in float32, and the parameters, gradients and optimizer state
  stay float32 (bfloat16 has float32's exponent range: no loss scaling). The
  autocast keeps no cast cache (``cache_enabled=False``), as a CUDA graph
  capture of it requires. tests/test_batched_precision.py trains a small
  problem in fp32 and bf16 over several seeds and checks that accuracy and
  SAIF agree within seed noise.
"""

import contextlib

import torch

from minimal_attn.backends import cuda_graphs
from minimal_attn.errors import InputError

#: Eager steps per (phases, batch shape) before a CUDA graph captures it.
WARMUP = 2


def check_precision(precision, device):
    """Refuse ``tf32`` off CUDA (a CUDA matmul mode; on the CPU it would do nothing)."""
    if precision == "tf32" and device.type != "cuda":
        raise InputError(f"precision='tf32' sets the CUDA matmuls to TF32 and needs a CUDA "
                         f"device, got {device}: use precision='bf16' or 'fp32'",
                         param="precision")


@contextlib.contextmanager
def precision_scope(precision):
    """Inside: float32 matmuls in TF32 when ``precision`` is tf32; the setting before, after.

    ``set_float32_matmul_precision`` keeps torch's legacy (``allow_tf32``) and new
    (``fp32_precision``) views of the setting in step; setting one of them alone
    makes the other raise when read."""
    if precision != "tf32":
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def autocast(precision, device):
    """bfloat16 autocast on ``device`` for ``bf16`` (no cast cache: CUDA graphs), else nothing."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)


def eager_step(trainer, idx, picks, sums, lrs):
    """Zero the gradients, forward (adding each lane's statistics to ``sums``), backward, update."""
    trainer.optimizer.zero_grad()
    trainer.forward(*trainer.batch(idx), picks, sums).backward()
    trainer.optimizer.step(lrs)


class CompiledStep:
    """The step with its forward and its optimizer update compiled by ``torch.compile``."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.forward = torch.compile(
            lambda idx, picks, sums: trainer.forward(*trainer.batch(idx), picks, sums))
        self.update = torch.compile(trainer.optimizer.update)

    def __call__(self, idx, picks, sums, lrs, key=None):
        optimizer = self.trainer.optimizer
        optimizer.zero_grad()
        self.forward(idx, picks, sums).backward()
        if optimizer.layout.has_grads():
            optimizer.prepare(lrs)
            # the first update makes the state eagerly, so the compiled one is made once
            (self.update if optimizer.has_state() else optimizer.update)()

    def reset(self):
        """Nothing to forget: compiled code reads the optimizer's buffers where they are."""


class GraphStep:
    """The whole step in one CUDA graph per (phases, batch shape), replayed with new indices."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.graphs = {}         # key -> (graph, static idx, static sums, picks, state id)
        self.seen = {}                      # key -> eager steps run so far
        self.stream = None

    def reset(self):
        """Forget the graphs (after a restore: they point at the old optimizer state)."""
        self.graphs, self.seen = {}, {}

    def __call__(self, idx, picks, sums, lrs, key):
        trainer = self.trainer
        # a graph reads the data, labels and optimizer state where they were at capture
        key = (key, tuple(idx.shape), id(trainer.stores["train"]), id(trainer.y))
        if key in self.graphs and self.graphs[key][4] != trainer.optimizer.state_id():
            self.reset()                           # the state moved: capture afresh
        with self._on(idx.device):
            if key not in self.graphs and self.seen.get(key, 0) < WARMUP:
                self._warm(idx, picks, sums, lrs)
                self.seen[key] = self.seen.get(key, 0) + 1
                return
            if key not in self.graphs:
                self.graphs[key] = self._capture(idx, picks, sums)
            graph, static_idx, static_sums = self.graphs[key][:3]
            trainer.optimizer.prepare(lrs)         # this step's factors, into static tensors
            static_idx.copy_(idx)
            graph.replay()
            sums += static_sums

    def _on(self, device):
        return torch.cuda.device(device)

    def _warm(self, idx, picks, sums, lrs):
        """An eager step on a side stream (torch's rule before a capture)."""
        self.stream = cuda_graphs.on_side_stream(
            lambda: eager_step(self.trainer, idx, picks, sums, lrs), idx.device, self.stream)

    def _capture(self, idx, picks, sums):
        """A graph of the step on static inputs: indices ``static_idx`` (copied in before
        each replay), statistics into ``static_sums``, the optimizer's factors where
        ``prepare`` puts them."""
        trainer, optimizer = self.trainer, self.trainer.optimizer
        if not optimizer.has_state():
            raise InputError("compile='cudagraph': the optimizer has no state to capture "
                             "(no eager step ran first); use compile='none'", param="compile")
        static_idx, static_sums = idx.clone(), torch.zeros_like(sums)

        def body():
            static_sums.zero_()
            trainer.forward(*trainer.batch(static_idx), picks, static_sums).backward()
            optimizer.update()

        optimizer.zero_grad()                      # gradients allocated inside the graph
        graph = self._record(body)
        # picks kept: the graph reads their seed indices
        return graph, static_idx, static_sums, picks, optimizer.state_id()

    def _record(self, body):
        """``body``'s kernels captured in a CUDA graph (recorded, not run)."""
        try:
            return cuda_graphs.record(body)
        except RuntimeError as err:
            raise InputError(f"compile='cudagraph' could not capture the training step "
                             f"({str(err).splitlines()[0]}); run with compile='compile' or "
                             f"'none'", param="compile") from err


def step_runner(trainer, how, device):
    """The step of ``trainer`` for ``TrainConfig.compile`` = ``how`` (see the module doc);
    every mode of :data:`.batched.MODES` keeps its seed indices on the device, so each
    can be captured."""
    if how == "none":
        return None
    if how == "compile":
        return CompiledStep(trainer)
    if device.type != "cuda":
        raise InputError(f"compile='cudagraph' captures the step in a CUDA graph and needs "
                         f"a CUDA device, got {device}: use compile='compile' or 'none'",
                         param="compile")
    return GraphStep(trainer)
