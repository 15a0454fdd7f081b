r"""The settings of one Snell Table 2 row (``attn-dyn agreement``, ``attn-dyn train-seq``).

Kept apart from the torch modules so that the command line reads its defaults
from here without importing torch. ``None`` fields take the paper's values
(:class:`minimal_attn.backends.snell.train.SeqTrainConfig`).
"""

from dataclasses import dataclass
from typing import Optional


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
