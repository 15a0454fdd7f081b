r"""A training step of the synthetic tasks' seed-batched LSTMs, eager or as a CUDA graph.

Snell et al. (2021), Secs. 3.3, 5.2 (the 20-seed figures). One step of
:func:`.synthetic_train.train_runs` (the per-run losses, their sum's backward and one
Adam update) launches about 3,500 operators at any size: two LSTMs unrolled over 40
positions each (:mod:`.batched_lstm`), forward and backward. On a card the host's
launches then set the pace (H200, H = 256: one run 40 ms a step, 20 runs batched
52 ms), so ``SyntheticConfig.compile`` offers:

* ``none`` (default): :func:`eager_step`, operator by operator.
* ``cudagraph`` (CUDA only): the whole step captured once per phases (the loss each
  run trains with: it changes once, at a hybrid's switch) and replayed with each
  batch copied into the graph's static input. Adam is made ``capturable`` (its step
  count lives on the card, in float64: :func:`step_dtype`). Each capture is checked
  before it is used: from the same state, one eager step and one replay of the graph
  must leave the parameters within a thousandth of an Adam step (``1e-3 * lr``) of each
  other. A capture that fails or differs is said once through ``log`` and the run goes
  on eagerly; either way the numbers are the eager step's (``train_runs``' result names
  the way it ran).

The shared moves of a capture are in :mod:`minimal_attn.backends.cuda_graphs`.
"""

import torch

from minimal_attn.backends import cuda_graphs
from minimal_attn.backends.snell.config import SYNTHETIC_COMPILE
from minimal_attn.backends.torch_backend import optimizer_step
from minimal_attn.errors import InputError

#: Ways to run the step (``SyntheticConfig.compile``).
COMPILE = SYNTHETIC_COMPILE
#: Eager steps of a phases before its capture (torch's whole-network recipe).
WARMUP = 2
#: A replay may differ from the eager step by this many Adam steps (``lr``) at most.
TOLERANCE = 1e-3


def check_compile(compile, device):
    """Refuse an unknown way, and ``cudagraph`` off CUDA."""
    if compile not in COMPILE:
        raise InputError(f"compile must be one of {', '.join(COMPILE)}, got {compile!r}",
                         param="compile")
    if compile == "cudagraph" and torch.device(device or "cpu").type != "cuda":
        raise InputError(f"compile='cudagraph' captures the step in a CUDA graph and needs a "
                         f"CUDA device, got {device}: use compile='none'", param="compile")


def make_adam(params, lr, compile):
    """Adam over ``params``; ``capturable`` for a graph, with its step count on the device
    in float64 (:func:`step_dtype`)."""
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr, capturable=compile == "cudagraph")
    if compile == "cudagraph":        # the state Adam would make at its first step, but
        for p in params:              # with the count in float64
            optimizer.state[p] = {"step": torch.zeros((), dtype=step_dtype(True),
                                                      device=p.device),
                                  "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
    return optimizer


def step_dtype(capturable):
    """The dtype of Adam's step count: float64 when ``capturable``, float32 (torch's) else.

    A capturable Adam computes its bias corrections ``1 - beta^t`` on the device in the
    count's dtype. torch's float32 leaves ``1 - 0.999^t`` off by up to 2e-5 of itself, so a
    float64 run steps differently from the eager one, whose corrections are Python floats:
    after 30 steps 3e-4 apart (SA) and 6e-3 (LV) in an emulation on the CPU, and by as much on
    an H200 (2026-11-28), where it failed the graph's float64 test. In float64 they agree.
    The eager count stays float32: it is read back as a Python float, exact to 2^24 steps.
    """
    return torch.float64 if capturable else torch.float32


def set_capturable(optimizer, capturable):
    """After ``load_state_dict`` (which takes the saved flag): the flag this run needs, the
    step counts where it needs them (the device when capturable, else the host) and in
    :func:`step_dtype`."""
    for group in optimizer.param_groups:
        group["capturable"] = capturable
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            if "step" in state:
                state["step"] = state["step"].to(p.device if capturable else "cpu",
                                                  step_dtype(capturable))


def eager_step(optimizer, loss_of, batch, phases, done):
    """One step: per-run losses ``loss_of(batch, phases)`` (R,), their sum's backward (each
    run gets its own gradient), Adam; returns the losses. ``done`` names the step in a
    divergence error."""
    loss = loss_of(batch, phases)
    optimizer.zero_grad(set_to_none=True)
    loss.sum().backward()
    optimizer_step(optimizer, done)
    return loss.detach()


def step_runner(params, optimizer, loss_of, compile, log=None):
    """``step(batch, phases, done) -> losses`` for ``compile`` (see the module doc); its
    ``way`` says how the steps ran."""
    if compile == "cudagraph":
        return GraphedStep(params, optimizer, loss_of, log)
    return EagerStep(optimizer, loss_of)


class EagerStep:
    """:func:`eager_step` with the optimizer and the losses bound."""

    way = "none"

    def __init__(self, optimizer, loss_of):
        self.optimizer, self.loss_of = optimizer, loss_of

    def __call__(self, batch, phases, done):
        return eager_step(self.optimizer, self.loss_of, batch, phases, done)


class GraphedStep:
    """The step as one CUDA graph for the phases in force, checked against eager once."""

    def __init__(self, params, optimizer, loss_of, log=None):
        self.params = list(params.values()) if isinstance(params, dict) else list(params)
        self.optimizer, self.loss_of, self.log = optimizer, loss_of, log
        self.key, self.graph, self.seen, self.stream = None, None, 0, None
        self.static_batch, self.static_loss = None, None
        self.eager_reason = None        # why the run went on eagerly (None: it did not)
        self.captures = 0               # graphs captured and checked

    @property
    def way(self):
        """How the steps ran: ``cudagraph``, or ``none`` with the reason it fell back."""
        if self.eager_reason is None:
            return "cudagraph"
        return f"none ({self.eager_reason})"

    def __call__(self, batch, phases, done):
        if self.eager_reason is not None:
            return eager_step(self.optimizer, self.loss_of, batch, phases, done)
        key = (tuple(phases), tuple(tuple(b.shape) for b in batch))
        if key != self.key:                    # one graph at a time: phases only move on
            self.key, self.graph, self.seen = key, None, 0
        with self._on(batch[0].device):
            if self.graph is None and self.seen < WARMUP:
                self.seen += 1
                return self._warm(batch, phases, done)
            if self.graph is None:
                return self._capture(batch, phases, done)
            for static, b in zip(self.static_batch, batch):
                static.copy_(b)
            self.graph.replay()
        return self.static_loss

    def _on(self, device):
        return torch.cuda.device(device)

    def _warm(self, batch, phases, done):
        out = {}

        def step():
            out["loss"] = eager_step(self.optimizer, self.loss_of, batch, phases, done)
        self.stream = cuda_graphs.on_side_stream(step, batch[0].device, self.stream)
        return out["loss"]

    def _record(self, body):
        return cuda_graphs.record(body)

    def _capture(self, batch, phases, done):
        """Capture the step on static inputs, then check one replay against an eager step
        from the same state; the step is taken once either way."""
        static_batch, out = [b.clone() for b in batch], {}

        def body():
            loss = self.loss_of(static_batch, phases)
            loss.sum().backward()
            self.optimizer.step()
            out["loss"] = loss.detach()

        self.optimizer.zero_grad(set_to_none=True)   # gradients allocated inside the graph
        try:
            graph = self._record(body)
        except RuntimeError as err:
            return self._fall_back(f"the step could not be captured: "
                                   f"{str(err).splitlines()[0]}", batch, phases, done)
        before = self._state()
        eager_loss = eager_step(self.optimizer, self.loss_of, batch, phases, done)
        eager = self._state()
        self._put(before)
        for static, b in zip(static_batch, batch):
            static.copy_(b)
        graph.replay()
        lr = max(group["lr"] for group in self.optimizer.param_groups)
        gap = max(float((p.detach() - q).abs().max()) for p, q in zip(self.params, eager[0]))
        if not gap <= TOLERANCE * lr:                # NaN included
            self._put(eager)                         # the eager step stands
            return self._fall_back(f"a replay differed from the eager step by {gap:.2g}, "
                                   f"over {TOLERANCE:g} x lr", None, phases, done, eager_loss)
        self.graph, self.static_batch, self.static_loss = graph, static_batch, out["loss"]
        self.captures += 1
        self.optimizer.zero_grad(set_to_none=True)   # the eager step's; replays use their own
        return self.static_loss

    def _fall_back(self, reason, batch, phases, done, loss=None):
        self.eager_reason, self.graph = reason, None
        if self.log:
            self.log(f"compile='cudagraph': {reason}; running eagerly")
        if loss is None:
            loss = eager_step(self.optimizer, self.loss_of, batch, phases, done)
        return loss

    def _state(self):
        """Copies of the parameters and the optimizer's state tensors."""
        with torch.no_grad():
            return ([p.detach().clone() for p in self.params],
                    [{k: v.clone() for k, v in self.optimizer.state[p].items()
                      if torch.is_tensor(v)} for p in self.params])

    def _put(self, saved):
        """Write ``saved`` back in place: the graph reads these tensors where they are."""
        with torch.no_grad():
            for p, q, state in zip(self.params, *saved):
                p.copy_(q)
                for k, v in state.items():
                    self.optimizer.state[p][k].copy_(v)
