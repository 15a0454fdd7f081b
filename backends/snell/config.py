r"""The settings of one Snell Table 2 row (``attn-dyn agreement``, ``attn-dyn train-seq``).

Kept apart from the torch modules so that the command line reads its defaults
from here without importing torch: :class:`SeqTrainConfig` (one model, ``attn-dyn
train-seq``), :class:`AgreementConfig` (a Table 2 row, ``attn-dyn agreement``) and
:class:`SyntheticConfig` with its presets (``attn-dyn synthetic``, Secs. 3.3, 5.2, 6).
``None`` fields take the paper's values (:data:`PAPER`, Appendix A.8).
"""

import math
from dataclasses import asdict, dataclass
from typing import Optional

from minimal_attn.backends.snell.inputs import check_int
from minimal_attn.errors import InputError, check_paradigm, check_positive, check_seeds

#: How a model's attention is made (Snell Sec. 2, A.6-A.7): learned, uniform, or frozen.
ATTENTIONS = ("learned", "uniform", "frozen")


@dataclass
class AgreementConfig:
    """One Table 2 row; ``None`` fields take the paper's values (see ``SeqTrainConfig``)."""

    task: str = "classify"
    dataset: str = "sst2"
    data_dir: str = "."
    steps: Optional[int] = None       # per model
    hidden: int = 256
    emb: Optional[int] = None
    out_hidden: int = 256
    batch_size: Optional[int] = None
    lr: float = 1e-3
    lr_schedule: str = "constant"     # or cosine (see SeqTrainConfig.lr_at)
    warmup: int = 0                   # linear warm-up steps
    clip: Optional[float] = None      # gradient-norm clipping
    dropout: float = 0.5              # translate: dropout (A.8: 0.5)
    max_len: Optional[int] = None     # drop training pairs longer than this (ids, either side)
    eval_every: Optional[int] = None
    max_train: Optional[int] = None   # first N training examples
    max_val: Optional[int] = None     # first N validation examples
    vocab_size: int = 8000            # translation: SentencePiece pieces (A.8)
    seed: int = 0
    proxy_d: int = 256                # proxy embedding width (A.10: d = 256)
    proxy_epochs: int = 5
    frozen: bool = True               # classification: the A.6 model (Table 10)
    logistic: bool = True             # classification: beta^log (Table 11)
    kendall: bool = True              # also Table 3 (Kendall's tau)
    train_eval: int = 0               # also Table 7 on this many training examples
    bleu: bool = True                 # translation: greedy BLEU (Tables 4, 6)
    embeddings: Optional[str] = None  # classification: GloVe-format vectors
    device: Optional[str] = None
    paradigm: str = "sa"              # sa, ha, lv, hybrid: the standard and second models'
    switch_step: object = None        # hybrid: first HA step, or "auto" (None: steps // 2)
    workers: int = 1                  # models (and the proxy) trained at once, each in its
    #                                   own process (backends/snell/workers.py); same results
    time_limit: Optional[float] = None  # seconds of training for the row, shared out among
    #                                   the models (agreement.model_time_limit); a model
    #                                   stops at its first evaluation after its share
    threads: Optional[int] = None     # torch CPU threads of the row (None: torch's), shared
    #                                   out among the workers (run control, not a setting)


PAPER = {"classify": {"steps": 4000, "batch_size": 32, "emb": 300,
                      "first_evals": (0, 10, 50, 100, 150, 200, 250), "every": 250},
         "translate": {"steps": 20000, "batch_size": 16, "emb": None,
                       "first_evals": (0, 50, 100, 500, 1000, 1500), "every": 2000}}
LR_SCHEDULES = ("constant", "cosine")
#: Options added after the first FORMAT 2 checkpoints existed: left out of the compared
#: settings at these values, so a run written before them still continues. ``embeddings``
#: is not a field: train_seq compares the hash of the GloVe file a model started from.
LATER_DEFAULTS = {"lr_schedule": "constant", "warmup": 0, "clip": None, "paradigm": "sa",
                  "switch_step": None, "embeddings": None}


@dataclass
class SeqTrainConfig:
    """One run of one model; ``None`` fields take the paper's value for the task."""

    task: str = "classify"            # classify (Sec. 2.4) or translate (Sec. 2.1)
    attention: str = "learned"        # learned, uniform (A.7) or frozen (A.6)
    steps: Optional[int] = None       # Adam updates; paper: 4000 (classify), 20000 here (translate)
    batch_size: Optional[int] = None  # paper: 32 (classify), 16 (translate)
    lr: float = 1e-3                  # Adam step size (PyTorch default; the paper gives none)
    lr_schedule: str = "constant"     # constant, or cosine: decay from lr to lr/100 at the end
    warmup: int = 0                   # steps of linear warm-up from lr/warmup to lr
    clip: Optional[float] = None      # clip the gradient norm to this (None: no clipping)
    hidden: int = 256                 # LSTM width (A.8: 256)
    emb: Optional[int] = None         # classify: embedding width (300); translate: = hidden
    out_hidden: int = 256             # translate: hidden layer of N (A.8: 256)
    dropout: float = 0.5              # translate: LSTM dropout (A.8: 0.5)
    eval_every: Optional[int] = None  # evaluate every this many steps after the first ones
    seed: int = 0                     # initialisation, data order, dropout
    bleu: bool = True                 # translate: greedy-decoding BLEU at every evaluation
    train_eval: int = 0               # also evaluate on this many training examples (Table 7)
    device: Optional[str] = None      # None: cuda if available, else cpu
    paradigm: str = "sa"              # sa, ha, lv or hybrid (V&R Sec. 2.3, per target token)
    switch_step: object = None        # hybrid: first HA step, or "auto"; None: steps // 2
    time_limit: Optional[float] = None  # seconds: stop at the first evaluation after them
    #                                   (run control, not a setting: a rerun continues)
    threads: Optional[int] = None     # torch CPU threads (None: torch's; run control too)

    def resolved(self):
        """A copy with the paper's values filled in (and the inputs checked)."""
        if self.task not in PAPER:
            raise InputError(f"task must be classify or translate, got {self.task!r}",
                             param="task")
        if self.attention not in ATTENTIONS:
            raise InputError(f"attention must be one of {', '.join(ATTENTIONS)}, got "
                             f"{self.attention!r}", param="attention")
        p = PAPER[self.task]
        c = SeqTrainConfig(**asdict(self))
        c.steps = p["steps"] if c.steps is None else c.steps
        c.batch_size = p["batch_size"] if c.batch_size is None else c.batch_size
        c.emb = (p["emb"] or c.hidden) if c.emb is None else c.emb
        c.eval_every = p["every"] if c.eval_every is None else c.eval_every
        for name in ("steps", "batch_size", "hidden", "emb", "out_hidden", "eval_every"):
            check_int(name, getattr(c, name), 1)
        check_int("train_eval", c.train_eval, 0)
        check_int("seed", c.seed, 0)
        check_seeds("seed", c.seed, 2, param="seed")           # the second run: seed + 1
        check_int("warmup", c.warmup, 0)
        if c.lr_schedule not in LR_SCHEDULES:
            raise InputError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got "
                             f"{c.lr_schedule!r}", param="lr_schedule")
        if not 0.0 <= c.dropout < 1.0:
            raise InputError(f"dropout must be in [0, 1), got {c.dropout}", param="dropout")
        if c.task == "translate" and c.hidden % 2:
            raise InputError(f"hidden must be even for translation, got {c.hidden}",
                             param="hidden")
        c.paradigm = check_paradigm(c.paradigm)
        c.switch_step = check_switch(c.switch_step, c.steps, c.paradigm)
        for name in ("lr",) + tuple(k for k in ("clip", "time_limit")
                                    if getattr(c, k) is not None):
            try:
                check_positive(name, getattr(c, name))
            except InputError as exc:
                raise InputError(str(exc), param=name) from None
        return c

    def lr_at(self, step):
        """Adam's step size for update ``step`` (0-based): warm-up, then constant or cosine.

        A function of the step alone, so a resumed run needs no scheduler state.
        """
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        if self.lr_schedule == "constant":
            return self.lr
        frac = (step - self.warmup) / max(self.steps - self.warmup, 1)     # 0 .. 1
        return self.lr * (0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * frac)))

    def eval_steps(self):
        p = PAPER[self.task]
        steps = {s for s in p["first_evals"] if s <= self.steps}
        steps |= set(range(0, self.steps + 1, self.eval_every)) | {self.steps}
        return sorted(steps)


def check_switch(switch_step, steps, paradigm):
    """The hybrid's switch: ``"auto"``, or a step in 0..steps (None: steps // 2); else None."""
    if paradigm != "hybrid":
        return None
    if switch_step is None:
        return steps // 2
    if str(switch_step).strip().lower() == "auto":
        return "auto"
    try:
        value = int(switch_step)
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value <= steps:
        raise InputError(f"switch_step must be auto or a step in 0..{steps}, got "
                         f"{switch_step!r}", param="switch_step")
    return value


#: Ways a synthetic training step runs (``SyntheticConfig.compile``; .synthetic_graph).
SYNTHETIC_COMPILE = ("none", "cudagraph")


@dataclass
class SyntheticConfig:
    """Optimisation settings shared by every run of a task; the defaults are the CPU size."""

    steps: int = 1000                 # Adam steps
    hidden: int = 32                  # LSTM state size H (paper, App. A.8: 256)
    embed: Optional[int] = None       # embedding size E; None: = hidden
    batch_size: int = 32              # sequences per step and run
    lr: float = 3e-3                  # Adam learning rate (our choice at H = 32; paper: none)
    eval_every: int = 50              # steps between test evaluations (and checkpoints)
    n_test: int = 200                 # fixed test sequences per run
    uniform: bool = False             # freeze attention to 1/L (beta^uf models)
    device: Optional[str] = "cpu"     # cpu, cuda, cuda:K or auto (None: auto)
    dtype: str = "float32"            # float64 for exactness tests
    vocab: Optional[int] = None       # seq2seq word ids 1..vocab; None: the conditions' largest
    paradigm: str = "sa"              # sa, ha, lv or hybrid per target token (attention_losses)
    switch_step: object = None        # hybrid: first HA step, or "auto" per run; None: steps // 2
    time_limit: Optional[float] = None  # seconds: stop at the first evaluation after it
    compile: str = "none"             # none, or cudagraph (CUDA): how a step runs (synthetic_graph)


def _size(seeds, **given):
    d = SyntheticConfig()
    return {"seeds": seeds, "steps": d.steps, "hidden": d.hidden, "embed": d.embed,
            "batch_size": d.batch_size, "lr": d.lr, **given}


#: Presets of ``attn-dyn synthetic`` and of the synthetic cells: the CPU size
#: (the dataclass defaults, minutes on one core) and the paper's (Snell App. A.8:
#: LSTM width 256; the steps and lr are ours, the paper gives none).
SYNTHETIC_SIZES = {"cpu": _size(4), "paper": _size(20, steps=3000, hidden=256, embed=256,
                                                    lr=1e-3)}


def sized_config(size="cpu", seeds=None, **settings):
    """``(SyntheticConfig, seeds)`` of preset ``size``, the settings given (not None) winning.

    ``eval_every`` not given: a twentieth of the steps (at least 1).
    """
    if size not in SYNTHETIC_SIZES:
        raise InputError(f"unknown size {size!r}: use {' or '.join(SYNTHETIC_SIZES)}",
                         param="size")
    chosen = dict(SYNTHETIC_SIZES[size])
    chosen.update({k: v for k, v in dict(settings, seeds=seeds).items() if v is not None})
    seeds = chosen.pop("seeds")
    chosen.setdefault("eval_every", max(1, chosen["steps"] // 20))
    return SyntheticConfig(**chosen), seeds
