r"""Text data for the second paper: tokenisers, vocabularies, Multi30k and SST-2 readers.

Snell, Zhong, Klein & Steinhardt (2021), Sections 2.3-2.4 and 4: the proxy
model and IBM Model 1 both see a pair as an input word sequence
:math:`x = (x_1..x_L)` and an output word sequence :math:`y = (y_1..y_T)`;
binary classification is the case :math:`T = 1`, :math:`|O| = 2`.

Two tokenisers, kept apart on purpose:

* :func:`tokenize` (models and tutorials): lower-case, then words (runs of
  letters, digits, ``_``) and single punctuation marks, so ``"males, are."``
  gives ``["males", ",", "are", "."]``.
* :func:`whitespace_tokens` (the ``attn-dyn ibm1`` command): lower-case, split
  on whitespace only, which is what GIZA++, fast_align and NLTK users expect.

Everything returns plain Python lists or NumPy integer arrays. Readers take
paths as arguments (the library never assumes where data lives) and turn every
problem a user can cause (missing, unreadable, undecodable or empty files,
line counts that differ, bad TSV rows) into one :class:`InputError`.
"""

import collections
import gzip
import itertools
import os
import re
import zlib

import numpy as np

from minimal_attn.errors import InputError

UNK = "<unk>"
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


# ------------------------------------------------------------------ tokenisers
def tokenize(text):
    """Lower-case ``text`` and split it on whitespace and punctuation (kept as tokens)."""
    return _TOKEN_RE.findall(text.lower())


def whitespace_tokens(text):
    """Lower-case ``text`` and split it on whitespace only (the ``ibm1`` CLI rule)."""
    return text.lower().split()


def _has_text(word):
    """True when ``word`` holds a visible character (not only control characters and
    spaces); a whole line may hold tabs or no-break spaces and still have words."""
    return any(ch.isprintable() and not ch.isspace() for ch in word)


# ------------------------------------------------------------------ vocabulary
class Vocab:
    """A word <-> id map with ``<unk>`` at id 0 and a minimum count.

    Words are ordered by decreasing training count, ties alphabetically, so the
    ids do not depend on the order of the corpus.
    """

    def __init__(self, itos):
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary words must be distinct")
        self.unk_id = self.stoi.get(UNK)

    @classmethod
    def build(cls, sentences, min_count=1, unk=True):
        """Vocabulary of the words seen at least ``min_count`` times in ``sentences``.

        With ``unk=False`` no ``<unk>`` is added and :meth:`encode` rejects
        unknown words (used when every word of the corpus must keep its name).
        """
        if min_count < 1 or int(min_count) != min_count:
            raise InputError(f"min_count must be an integer >= 1, got {min_count}")
        counts = collections.Counter(itertools.chain.from_iterable(sentences))
        kept = sorted(w for w, c in counts.items() if c >= min_count and w != UNK)
        kept.sort(key=counts.__getitem__, reverse=True)   # stable: ties stay alphabetical
        return cls(([UNK] if unk else []) + kept)

    def __len__(self):
        return len(self.itos)

    def __contains__(self, word):
        return word in self.stoi

    def encode(self, tokens):
        """Ids of ``tokens`` as an int64 array; unknown words map to ``<unk>``."""
        if self.unk_id is None:
            try:
                return np.array([self.stoi[w] for w in tokens], dtype=np.int64)
            except KeyError as exc:
                raise KeyError(f"word {exc.args[0]!r} is not in a vocabulary without <unk>") \
                    from None
        get, unk = self.stoi.get, self.unk_id
        return np.array([get(w, unk) for w in tokens], dtype=np.int64)

    def encode_all(self, sentences):
        """:meth:`encode` for every sentence: a list of int64 arrays (views of one buffer)."""
        lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
        words = itertools.chain.from_iterable(sentences)
        if self.unk_id is None:
            ids = map(self.stoi.__getitem__, words)
        else:
            ids = map(self.stoi.get, words, itertools.repeat(self.unk_id))
        try:
            flat = np.fromiter(ids, dtype=np.int64, count=int(lengths.sum()))
        except KeyError as exc:
            raise KeyError(f"word {exc.args[0]!r} is not in a vocabulary without <unk>") \
                from None
        ends = np.cumsum(lengths).tolist()                 # slicing beats np.split 5x here
        return [flat[e - n:e] for e, n in zip(ends, lengths.tolist())]

    def decode(self, ids):
        return [self.itos[int(i)] for i in ids]


# ------------------------------------------------------------------ raw files
def open_text(path):
    """``path`` opened for reading as UTF-8 text: gzip-compressed files (Multi30k's release
    ships ``train.en.gz``) are decompressed on the fly, and a byte-order mark is dropped
    (``utf-8-sig``), so neither reaches a token."""
    with open(path, "rb") as f:
        compressed = f.read(2) == b"\x1f\x8b"
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def plain_or_gz(path):
    """``path``, or ``path.gz`` when only that exists (Multi30k's release is gzipped)."""
    return path + ".gz" if not os.path.exists(path) and os.path.exists(path + ".gz") else path


def read_text(path, what="file", fix="convert it to UTF-8"):
    """The whole text of ``path``, plain or gzipped UTF-8 (:func:`open_text`; newlines
    universal), each failure one line; ``fix``: what to do about text that is not UTF-8."""
    try:
        with open_text(path) as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start}); {fix}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{what} {path} is a damaged gzip file ({exc or 'cut short'}); "
                         "download it again or give the unpacked file") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}; check its "
                         "permissions") from None


def read_lines(path, what="file"):
    """The lines of a UTF-8 text file, plain or gzipped (newlines and a byte-order mark
    stripped); InputError if unusable.

    A file with no non-blank line counts as empty and is rejected.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{what} {path} does not exist; check the path")
    if os.path.isdir(path):
        raise InputError(f"{what} {path} is a folder; give a text file")
    # universal newlines leave \n only (\r\n and \r read as \n); split there, not with
    # str.splitlines, which also splits at U+2028 etc. and would break line alignment
    lines = read_text(path, what).split("\n")
    if lines[-1] == "":
        lines.pop()                                   # the final newline ends a line
    if any("\x00" in line for line in lines):
        raise InputError(f"{what} {path} is binary (it contains NUL bytes), not text; "
                         "give a UTF-8 text file with one sentence per line")
    if not any(line.strip() for line in lines):
        raise InputError(f"{what} {path} is empty; give a file with one sentence per line")
    return lines


def read_parallel(src_path, tgt_path, tokenizer=tokenize, drop_empty=True):
    """Read line-aligned parallel files into two lists of token lists.

    Parameters
    ----------
    src_path, tgt_path : path   one sentence per line, line ``n`` of one the
                                translation of line ``n`` of the other
    tokenizer : callable        str -> list of str (:func:`tokenize` or
                                :func:`whitespace_tokens`)
    drop_empty : bool           drop pairs where either side has no token (an
                                empty side carries no co-occurrence)

    Returns
    -------
    src, tgt : list of list of str, same length

    Blank lines at the end of only one file are ignored (an editor's final empty line);
    any other difference in line count is refused.
    """
    src_lines = read_lines(src_path, "source file")
    tgt_lines = read_lines(tgt_path, "target file")
    n = min(len(src_lines), len(tgt_lines))
    if any(line.strip() for line in src_lines[n:] + tgt_lines[n:]):
        raise InputError(
            f"source file {src_path} has {len(src_lines)} lines but target file "
            f"{tgt_path} has {len(tgt_lines)}; parallel files must be line-aligned")
    # blank lines at the end of one file only pair with nothing: ignored
    src = [tokenizer(s) for s in src_lines[:n]]
    tgt = [tokenizer(t) for t in tgt_lines[:n]]
    for path, side in ((src_path, src), (tgt_path, tgt)):
        if not any(map(_has_text, itertools.chain.from_iterable(side))):
            raise InputError(f"{path} has no usable word (only control characters); "
                             "give a text file with one sentence per line")
    if drop_empty:
        keep = [n for n in range(len(src)) if src[n] and tgt[n]]
        src, tgt = [src[n] for n in keep], [tgt[n] for n in keep]
        if not src:
            raise InputError(f"no line pair of {src_path} and {tgt_path} has words on "
                             "both sides; check the files")
    return src, tgt


def read_multi30k(folder, split="train", src_lang="de", tgt_lang="en",
                  tokenizer=tokenize, max_pairs=None):
    """Read ``<folder>/<split>.<src_lang>`` and ``<split>.<tgt_lang>`` (raw Multi30k layout).

    Returns
    -------
    src, tgt : list of list of str   the first ``max_pairs`` non-empty pairs
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise InputError(f"Multi30k folder {folder} does not exist; give the folder "
                         f"holding {split}.{src_lang} and {split}.{tgt_lang}")
    src, tgt = read_parallel(os.path.join(folder, f"{split}.{src_lang}"),
                             os.path.join(folder, f"{split}.{tgt_lang}"), tokenizer)
    if max_pairs is not None:
        src, tgt = src[:max_pairs], tgt[:max_pairs]
    return src, tgt


def read_sst2(path, tokenizer=whitespace_tokens):
    """Read a GLUE SST-2 TSV file (header ``sentence<TAB>label``, labels 0/1).

    The GLUE text is already lower-cased and tokenised, hence the whitespace
    tokeniser by default. Blank lines are skipped; a row with an empty sentence is
    refused (GLUE has none).

    Returns
    -------
    sentences : list of list of str
    labels : int64 array, shape (N,)
    """
    lines = read_lines(path, "SST-2 file")
    header = [h.strip().lower() for h in lines[0].rstrip("\r").split("\t")]
    if header == ["index", "sentence"]:
        raise InputError(f"SST-2 file {path} has no labels (GLUE's test set: header "
                         "'index<TAB>sentence'); evaluate on the labelled dev.tsv")
    if header != ["sentence", "label"]:
        raise InputError(f"SST-2 file {path} must start with the header "
                         f"'sentence<TAB>label', found {lines[0][:60]!r}")
    sentences, labels = label_rows(lines, path, "SST-2 file", start=1, column="sentence",
                                   tokenizer=tokenizer)
    if not sentences:
        raise InputError(f"SST-2 file {path} has a header but no rows")
    return sentences, np.array(labels, dtype=np.int64)


def label_rows(lines, path, what, start=0, column="text", tokenizer=whitespace_tokens,
               header=None, param=None):
    """``(token lists, labels)`` of the rows ``column<TAB>0|1`` in ``lines[start:]`` (a
    file's lines, numbered from 1), for SST-2 and the ``tsv`` data set alike.

    A row has exactly two columns (a third would fold into the text), a label 0 or 1 and
    a non-empty text; blank lines are skipped. ``header``: the line a caller took for the
    header, named when the first row after it fails (a file of word labels).
    """
    texts, labels = [], []
    for n, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        at, parts = f"{what} {path} line {n}", line.rstrip("\r").split("\t")
        if len(parts) != 2:
            found = "no tab" if len(parts) == 1 else f"{len(parts)} tab-separated columns"
            raise InputError(f"{at} has {found}, not the 2 columns {column}<TAB>0|1: "
                             f"{line[:60]!r}; keep only the {column} and the label (a tab "
                             f"inside the {column}: make it a space)", param=param)
        label = parts[1].strip()
        if label not in ("0", "1"):
            read = f"; line {header} was read as the header" if header and not texts else ""
            raise InputError(f"{at} is not '{column}<TAB>0|1' (labels must be 0 or 1{read}): "
                             f"{line[:60]!r}", param=param)
        if not parts[0].strip():
            raise InputError(f"{at} has an empty {column}; give its text or delete the row",
                             param=param)
        texts.append(tokenizer(parts[0]))
        labels.append(int(label))
    return texts, labels


def labels_as_targets(labels):
    """Classification as translation (Section 2.4): each label becomes a one-word output."""
    return [np.array([int(y)], dtype=np.int64) for y in labels]
