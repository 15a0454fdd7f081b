r"""What ``train-seq`` and ``agreement`` check before the first step (Snell et al. 2021, A.8).

A GloVe-format embeddings file (readable, of the embedding width), and
whether a model of the asked size fits in memory and finishes: each refused
with one :class:`~minimal_attn.errors.InputError` line naming the option,
before anything is written or allocated (the device is checked by
``torch_backend.get_device``).
"""

import math

from minimal_attn.errors import InputError, check_int_at_least
from minimal_attn.experiments.checkpoints import file_hash
from minimal_attn.experiments.resources import check_memory, check_steps


def check_int(name, value, low):
    """:func:`check_int_at_least` with the parameter named, so the CLI names its option."""
    return check_int_at_least(name, value, low, param=name)


def _vectors(path):
    """(word, values) of each line of a GloVe text file; a word2vec ``count dim`` header skipped."""
    with open(path, encoding="utf-8-sig") as f:      # a byte-order mark is not the first word
        for n, line in enumerate(f):
            parts = line.rstrip().split(" ")
            if n == 0 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue
            if len(parts) > 1:
                yield parts[0], parts[1:]


def embeddings_hash(path):
    """The :func:`~minimal_attn.experiments.checkpoints.file_hash` of an embeddings file:
    a model's checkpoint names the vectors it started from by it, not by the file's path."""
    try:
        return file_hash(path)
    except OSError as exc:
        raise InputError(f"cannot read embeddings {path}: {exc.strerror or exc}; give a GloVe "
                         "text file (word v1 .. vE per line)", param="embeddings") from None


def check_embeddings(path, width, option="emb"):
    """Refuse an embeddings file that cannot be read or whose vectors are not ``width`` wide
    (``option``: the setting that gives the width: emb, or hidden for translation)."""
    if path is None:
        return
    try:
        first = next(_vectors(path), None)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read embeddings {path}: {getattr(exc, 'strerror', None) or exc}"
                         "; give a GloVe text file (word v1 .. vE per line)",
                         param="embeddings") from None
    if first is None:
        raise InputError(f"embeddings {path} holds no vector; give a GloVe text file "
                         "(word v1 .. vE per line)", param="embeddings")
    if len(first[1]) != width:
        raise InputError(f"embeddings {path} hold vectors of width {len(first[1])} but the "
                         f"embedding width {option} is {width}; give {option} "
                         f"{len(first[1])} or another file", param=("embeddings", option))


def load_embeddings(model, path, itos, log=None):
    """Copy GloVe-format vectors (``word v1 .. vE`` per line) into the rows of known words."""
    import torch

    weight, index, found = model.embed.weight, {w: i for i, w in enumerate(itos)}, 0
    width = weight.shape[1]
    check_embeddings(path, width)
    odd = []                  # words of lines of another width (GloVe has words with spaces)
    try:
        for word, values in _vectors(path):
            if len(values) != width:
                odd.append(word)
            elif word in index:
                vector = [float(v) for v in values]
                if not all(math.isfinite(v) for v in vector):
                    raise InputError(f"embeddings {path}: the vector of {word!r} holds a "
                                     "value that is not a finite number; fix or drop that "
                                     "line", param="embeddings")
                with torch.no_grad():
                    weight[index[word]] = torch.tensor(vector)
                found += 1
    except InputError:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read embeddings {path}: {exc}; give a GloVe text file "
                         "whose width equals the embedding width", param="embeddings") from None
    if odd and log is not None:
        log(f"warning: skipped {len(odd)} line(s) of {path} whose vector is not {width} "
            f"wide (the first: {odd[0]!r})")
    if not found and log is not None:
        log(f"warning: no word of the vocabulary has a vector in {path}; "
            "the embeddings stay random")
    return found


def estimate_bytes(task, c):
    """Memory one model of ``c`` on ``task`` needs (bytes, an estimate): parameters with
    gradients and two Adam moments, and the activations of one step kept for backward."""
    V, H, B, out_h = task.n_vocab + 1, c.hidden, c.batch_size, c.out_hidden
    L = max(len(s) for s in task.train_src + task.val_src)
    if c.task == "classify":
        E = c.emb
        params = V * E + 8 * H * (E + H + 2) + 2 * H * H + 3 * H
        step = B * L * (E + 16 * H)
    else:
        T = max(len(t) for t in task.train_tgt + task.val_tgt)
        params = V * H + 24 * H * H + 2 * H * out_h + out_h * V
        step = B * (8 * H * L + T * (18 * H + out_h + 3 * V))
    return 4 * (4 * params + 3 * step)


def check_run(task, c):
    """Refuse a model (resolved SeqTrainConfig ``c``) that cannot fit in memory or finish."""
    check_steps(c.steps, "training the model", param="steps")
    size = ("hidden", "emb", "batch_size") if c.task == "classify" else \
        ("hidden", "out_hidden", "batch_size", "vocab_size")
    check_memory(estimate_bytes(task, c), f"a {c.task} model of LSTM width {c.hidden} "
                 f"({task.n_vocab} words)", param=size)
