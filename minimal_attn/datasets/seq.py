r"""Token ids for the neural experiments of Snell et al. (2021), Appendix A.8.

One :class:`TextTask` holds the training and validation pairs of a task as
lists of int64 arrays, the ids that the LSTM models, the proxy model
(:mod:`minimal_attn.proxy`, Snell Eqs. (5)-(6)) and the logistic proxy
(:mod:`minimal_attn.logistic_proxy`, Snell Eq. (55)) all see:

* **classify** (Section 2.4, T = 1, |O| = 2): word-level ids; words seen fewer
  than 3 times in the training set become ``<unk>`` (A.8). Targets are the
  labels as one-word outputs. Data sets: ``sst2`` (GLUE TSV; training on
  ``train.tsv``, validation on the sentence-level ``test.tsv`` of the shared
  copy, which is GLUE's labelled dev set, or on ``dev.tsv`` beside GLUE's own
  unlabelled ``test.tsv``), ``hatexplain`` (the binary JSONL or the original
  ``dataset.json``, toxic = 1: hate speech or offensive; official train/val
  split) and ``tsv`` (``train.tsv`` and ``dev.tsv``/``val.tsv``/``test.tsv``,
  rows ``text<TAB>0|1``: exactly two columns; a first row whose label is not 0 or 1
  is a header). Every file may be
  gzip-compressed (under its own name or with ``.gz`` added) and may start with a
  byte-order mark; blank lines are skipped and a row with an empty text refused.
* **translate** (Section 2.1): one SentencePiece vocabulary of ``vocab_size``
  pieces shared by source and target (A.8) when ``sentencepiece`` is
  installed, word-level ids otherwise. Ids 0, 1, 2 are ``<unk>``, ``<s>``,
  ``</s>``; targets end with ``</s>``. Data sets: ``multi30k`` (raw
  ``train``/``val`` files, English -> German as in the paper, plain or as the
  release's ``.gz``) and ``parallel``
  (``train.src``, ``train.tgt``, ``val.src``, ``val.tgt``). Lines blank in both
  files are skipped; a pair with one empty side is dropped and counted
  (``info["one_sided_pairs"]``).

The padding id of the networks is ``n_vocab``, one beyond the vocabulary, so
every real token has the same id in the network and in the NumPy proxies.
"""

import dataclasses
import os
from typing import Callable, Optional

import numpy as np

from minimal_attn.datasets.hatexplain import read_hatexplain
from minimal_attn.datasets.pieces import sentencepiece_model
from minimal_attn.datasets.text import (
    UNK,
    Vocab,
    label_rows,
    plain_or_gz,
    read_lines,
    read_parallel,
    read_sst2,
    tokenize,
)
from minimal_attn.errors import InputError, check_folder

TASKS = ("classify", "translate")
DATASETS = {"sst2": "classify", "hatexplain": "classify", "tsv": "classify",
            "multi30k": "translate", "parallel": "translate"}
BOS, EOS = "<s>", "</s>"


@dataclasses.dataclass
class TextTask:
    """Token ids of one task; every list holds one int64 array per example."""

    task: str                    # "classify" or "translate"
    train_src: list              # (L_n,) input ids
    train_tgt: list              # (T_n,) output ids: (1,) labels, or target pieces + </s>
    val_src: list
    val_tgt: list
    n_vocab: int                 # input vocabulary (translation: shared by both sides)
    n_out: int                   # output vocabulary: 2 for classification
    itos: list                   # id -> token string (pieces for SentencePiece)
    decode: Optional[Callable] = None   # ids -> detokenised text (translation, for BLEU)
    tokenizer_model: Optional[bytes] = None  # the serialised SentencePiece model, if any
    info: dict = dataclasses.field(default_factory=dict)

    @property
    def pad_id(self):
        return self.n_vocab

    def val_references(self):
        """The detokenised validation targets (BLEU references), without ``</s>``."""
        return [self.decode(t[:-1]) for t in self.val_tgt]


# ------------------------------------------------------------------ classification
def _read_label_tsv(path, what):
    """Rows ``text<TAB>0|1`` (:func:`.text.label_rows`) after an optional header: a first
    row whose label is not 0 or 1, whatever its column names. A file of word labels is then
    refused at its second row, whose message says that the first was read as the header."""
    lines = read_lines(path, what)
    first = next(n for n, line in enumerate(lines) if line.strip())    # read_lines: one is
    parts = lines[first].rstrip("\r").split("\t")
    header = first + 1 if len(parts) == 2 and parts[1].strip() not in ("0", "1") else None
    texts, labels = label_rows(lines, path, what, start=header or 0, tokenizer=tokenize,
                               header=header, param="data_dir")
    if not texts:
        read = f" (line {header} was read as the header: labels must be 0 or 1)" \
            if header else ""
        raise InputError(f"{what} {path} has no 'text<TAB>0|1' rows{read}", param="data_dir")
    return texts, np.array(labels, dtype=np.int64)


def _first_file(folder, names, what):
    """The first of ``names`` (or its ``.gz``) in ``folder``."""
    for name in names:
        path = plain_or_gz(os.path.join(folder, name))
        if os.path.isfile(path):
            return path
    raise InputError(f"{what}: none of {', '.join(names)} (plain or .gz) in {folder}; check "
                     "--data-dir", param="data_dir")


def _read_hatexplain(folder):
    """Training and validation posts through V&R's reader, so with its checks and the
    official split (``post_id_divisions.json`` beside the file, else each JSONL post's
    ``orig_split``), as ``attn-dyn train --dataset hatexplain`` reads them. The binary
    JSONL or the original ``dataset.json``, whose three classes become HateXplain's
    binary task: toxic (hate speech or offensive) = 1, normal = 0."""
    data = read_hatexplain(folder)
    out = []
    for s in ("train", "val"):
        posts = data.splits[s]
        if not posts.y.size:
            raise InputError(f"hatexplain in {folder}: the {s} split has no post; give posts "
                             f"with orig_split {s}, or list them under {s} in "
                             "post_id_divisions.json", param="data_dir")
        toxic = np.array([posts.classes[k] in ("toxic", "hatespeech", "offensive")
                          for k in posts.y], dtype=np.int64)
        out.append(([[t.lower() for t in tokens] for tokens in posts.tokens], toxic))
    return out


def _sst2_eval_file(folder):
    """The labelled evaluation file: ``test.tsv`` (the shared copy: GLUE's dev set, with
    labels), else ``dev.tsv`` (GLUE's own layout, whose ``test.tsv`` has no labels)."""
    test, dev = (plain_or_gz(os.path.join(folder, f"{name}.tsv")) for name in ("test", "dev"))
    if os.path.isfile(test) and os.path.isfile(dev):
        first = read_lines(test, "SST-2 file")[0].rstrip("\r").split("\t")
        return dev if [h.strip().lower() for h in first] == ["index", "sentence"] else test
    return _first_file(folder, ["test.tsv", "dev.tsv"], "SST-2")


def _classification(dataset, folder):
    if dataset == "sst2":
        return (read_sst2(_first_file(folder, ["train.tsv"], "SST-2")),
                read_sst2(_sst2_eval_file(folder)))
    if dataset == "hatexplain":
        return _read_hatexplain(folder)
    return (_read_label_tsv(_first_file(folder, ["train.tsv"], "TSV"), "TSV file"),
            _read_label_tsv(_first_file(folder, ["dev.tsv", "val.tsv", "test.tsv"], "TSV"),
                            "TSV file"))


def _nonempty(src, tgt):
    keep = [n for n in range(len(src)) if len(src[n]) and len(tgt[n])]
    return [src[n] for n in keep], [tgt[n] for n in keep]


def load_classification(dataset, folder, max_train=None, max_val=None, min_count=3):
    """A :class:`TextTask` for binary classification, word-level with ``min_count`` (A.8)."""
    (tr_x, tr_y), (va_x, va_y) = _classification(dataset, folder)
    tr_x, tr_y = tr_x[:max_train], tr_y[:max_train]
    va_x, va_y = va_x[:max_val], va_y[:max_val]
    vocab = Vocab.build(tr_x, min_count=min_count)
    tr = _nonempty(vocab.encode_all(tr_x), [np.array([y]) for y in tr_y])
    va = _nonempty(vocab.encode_all(va_x), [np.array([y]) for y in va_y])
    if not tr[0] or not va[0]:
        raise InputError(f"{dataset} in {folder}: the {'validation' if tr[0] else 'training'} "
                         "split has no example; check --data-dir", param="data_dir")
    return TextTask("classify", *tr, *va, n_vocab=len(vocab), n_out=2, itos=vocab.itos,
                    info={"dataset": dataset, "tokenizer": f"word, min count {min_count}",
                          "n_train": len(tr[0]), "n_val": len(va[0]),
                          "majority_val": float(max(np.mean(va_y), 1 - np.mean(va_y)))})


# ------------------------------------------------------------------ translation
def _read_pairs(folder, split, src_lang, tgt_lang):
    """Raw text of the line pairs (tokenised later) and how many pairs had one empty side.

    A line blank in both files is skipped; a pair with one empty side (a sentence left
    untranslated) is dropped, as ``attn-dyn ibm1`` and ``proxy`` drop it, and counted in the
    task's ``info`` (``one_sided_pairs``), so nothing goes unrecorded."""
    check_folder(folder)
    paths = [plain_or_gz(os.path.join(folder, f"{split}.{lang}")) for lang in (src_lang, tgt_lang)]

    def raw(line):
        return [line.strip()] if line.strip() else []
    src, tgt = read_parallel(*paths, raw, drop_empty=False)
    keep = [n for n in range(len(src)) if src[n] and tgt[n]]
    one_sided = sum(bool(s) != bool(t) for s, t in zip(src, tgt))
    return [src[n][0] for n in keep], [tgt[n][0] for n in keep], one_sided


def load_translation(dataset, folder, max_train=None, max_val=None, vocab_size=8000,
                     src_lang="en", tgt_lang="de", tokenizer="auto", model_file=None):
    """A :class:`TextTask` for translation with a shared vocabulary (A.8).

    ``tokenizer``: ``"sentencepiece"``, ``"word"`` or ``"auto"`` (SentencePiece
    when installed). ``model_file``: a saved SentencePiece model to reuse (so a
    resumed run sees the same ids); a newly trained one is returned as
    ``tokenizer_model`` (bytes) for the caller to save.
    """
    if dataset == "parallel":
        src_lang, tgt_lang = "src", "tgt"
    tr_src, tr_tgt, tr_one_sided = _read_pairs(folder, "train", src_lang, tgt_lang)
    va_src, va_tgt, va_one_sided = _read_pairs(folder, "val", src_lang, tgt_lang)
    tr_src, tr_tgt, va_src, va_tgt = (tr_src[:max_train], tr_tgt[:max_train],
                                      va_src[:max_val], va_tgt[:max_val])
    if tokenizer == "auto":
        try:
            import sentencepiece  # noqa: F401
            tokenizer = "sentencepiece"
        except ImportError:
            tokenizer = "word"
    if tokenizer == "sentencepiece":
        sp, proto = sentencepiece_model(tr_src + tr_tgt, vocab_size, model_file)
        itos = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        encode = sp.encode

        def decode(ids):
            return sp.decode([int(i) for i in ids])
    elif tokenizer == "word":
        words = Vocab.build([tokenize(s) for s in tr_src + tr_tgt]).itos[1:]
        vocab = Vocab([UNK, BOS, EOS] + [w for w in words if w not in (BOS, EOS)])
        itos = vocab.itos

        def encode(texts):
            return [vocab.encode(tokenize(s)).tolist() for s in texts]

        def decode(ids):
            return " ".join(vocab.decode(ids))
        proto = None
    else:
        raise InputError(f"tokenizer must be auto, sentencepiece or word, got {tokenizer!r}")
    eos = 2

    def ids(texts, end):
        return [np.array(s + ([eos] if end else []), dtype=np.int64) for s in encode(texts)]

    tr = _nonempty(ids(tr_src, False), ids(tr_tgt, True))
    va = _nonempty(ids(va_src, False), ids(va_tgt, True))
    return TextTask("translate", *tr, *va, n_vocab=len(itos), n_out=len(itos), itos=itos,
                    decode=decode, tokenizer_model=proto,
                    info={"dataset": dataset, "tokenizer": tokenizer, "vocab": len(itos),
                          "n_train": len(tr[0]), "n_val": len(va[0]),
                          "direction": f"{src_lang}->{tgt_lang}",
                          # only when some were dropped: info feeds the proxies' cache key
                          **({"one_sided_pairs": {"train": tr_one_sided, "val": va_one_sided}}
                             if tr_one_sided or va_one_sided else {})})


def filter_length(task, max_len):
    """Drop the training pairs whose input or output has more than ``max_len`` ids.

    Validation pairs are kept whole, so the scores stay comparable with any
    filter. Returns a new :class:`TextTask` (``info`` records the filter).
    """
    keep = [n for n in range(len(task.train_src))
            if len(task.train_src[n]) <= max_len and len(task.train_tgt[n]) <= max_len]
    if not keep:
        raise InputError(f"no training pair has at most {max_len} ids on both sides; raise "
                         "--max-len", param="max_len")
    info = {**task.info, "max_len": max_len, "n_train": len(keep),
            "n_train_dropped": len(task.train_src) - len(keep)}
    return dataclasses.replace(task, train_src=[task.train_src[n] for n in keep],
                               train_tgt=[task.train_tgt[n] for n in keep], info=info)


def load_text_task(task, dataset, data_dir, max_train=None, max_val=None, vocab_size=8000,
                   model_file=None, tokenizer="auto", max_len=None):
    """Load ``dataset`` from ``data_dir`` for ``task`` (checks that they match).

    ``max_len``: keep only the training pairs of at most this many ids on each
    side (translation: pieces, counting the final ``</s>``), applied after
    ``max_train`` (so the SentencePiece vocabulary is trained on those examples).
    """
    if dataset not in DATASETS:
        raise InputError(f"unknown dataset {dataset!r}: use one of {', '.join(DATASETS)}",
                         param="dataset")
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}: use classify or translate", param="task")
    if DATASETS[dataset] != task:
        raise InputError(f"dataset {dataset} is a {DATASETS[dataset]} data set; use --task "
                         f"{DATASETS[dataset]}", param="task")
    for name, value in (("max_train", max_train), ("max_val", max_val), ("max_len", max_len)):
        if value is not None and value < 1:
            raise InputError(f"{name} must be >= 1, got {value}", param=name)
    if dataset == "hatexplain" and os.path.isfile(data_dir):
        folder = os.fspath(data_dir)           # the file itself, as ``train`` accepts it
    else:
        folder = check_folder(data_dir)
    if task == "classify":
        out = load_classification(dataset, folder, max_train, max_val)
    else:
        out = load_translation(dataset, folder, max_train, max_val, vocab_size,
                               model_file=model_file, tokenizer=tokenizer)
    return out if max_len is None else filter_length(out, max_len)
