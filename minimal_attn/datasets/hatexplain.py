r"""HateXplain posts with human rationales as the true foreground, V&R Section 5.

Vashisht & Ramaswamy (2023), Section 5 and Appendix A.3. A post is a
sequence of word tokens :math:`x_1..x_L`; the FCAM attends over its tokens
(the segments), and the annotators' rationale marks the true foreground
:math:`z^*`, a *set* of token positions. The focus score of the true
foreground is

.. math:: a_{z^*} = \sum_{z \in z^*} a_z .

Posts without a rationale (normal / non-toxic) have no true foreground: they
count for accuracy and are left out of SAIF (:func:`summarise_posts`).

Two layouts are read (:func:`read_hatexplain`):

* ``dataset.json`` of the original release: a dict ``post_id -> {"post_id",
  "annotators": [{"label": "hatespeech"|"offensive"|"normal", ...}] * 3,
  "rationales": [[0/1 per token], ...] (one list per annotator who gave one),
  "post_tokens": [...]}``. The label is the majority of the annotators (posts
  where all three disagree are dropped, as in the HateXplain paper, and
  counted); a token is in the rationale when a strict majority of the given
  rationale lists mark it (none for a post whose majority label is normal).
* ``hatexplain_binary.jsonl`` (the shared copy): one object a line with
  ``post_id``, ``tokens``, ``label`` ("toxic" / "non-toxic"), ``rationale``
  (already aggregated) and ``orig_split``.

The split comes from ``post_id_divisions.json`` beside the file when it is
there (else, for the JSONL, from ``orig_split``). :func:`encode_splits` builds
the word vocabulary on the training split (words seen fewer than
``min_count`` times become ``<unk>``) and pads every split to (N, L) arrays
with a boolean mask; padding is masked everywhere downstream. Encoding and the per-post
summaries live in :mod:`.hatexplain_encode` and are importable from here.
"""

import collections
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

from minimal_attn.datasets.hatexplain_encode import (  # noqa: F401 (re-export: one module)
    PAD,
    Encoded,
    encode_splits,
    foreground_focus,
    pad,
    summarise_posts,
)
from minimal_attn.datasets.text import plain_or_gz, read_text
from minimal_attn.errors import InputError

#: Class names by layout, in label-id order.
CLASSES = {"binary": ("non-toxic", "toxic"),
           "original": ("hatespeech", "offensive", "normal")}
SPLITS = ("train", "val", "test")


@dataclass
class Posts:
    """One split: tokens, labels (ids into ``classes``) and 0/1 rationales per token."""

    post_ids: List[str]
    tokens: List[List[str]]
    y: np.ndarray                          # (N,) int64
    rationale: List[np.ndarray]            # N arrays of 0/1, one entry per token
    classes: tuple


@dataclass
class HateXplain:
    """The three splits of one file and what the reader dropped."""

    splits: Dict[str, Posts]
    layout: str                            # "binary" or "original"
    dropped: Dict[str, int] = field(default_factory=dict)   # reason -> count


def _read_text(path, what):
    """:func:`.text.read_text` with the fix for a HateXplain file that is not UTF-8."""
    return read_text(path, what, "give the HateXplain file unchanged (download it again)")


def _load_json(path, what):
    try:
        return json.loads(_read_text(path, what))
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {path} is not valid JSON (line {exc.lineno}: {exc.msg}); "
                         "give the HateXplain file unchanged") from None


def _check_post(where, tokens, rationale):
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise InputError(f"{where}: tokens must be a non-empty list of strings")
    if not isinstance(rationale, list):
        raise InputError(f"{where}: rationale must be a list of 0/1, one per token (leave the "
                         "key out for a post without one)")
    if len(rationale) != len(tokens):
        raise InputError(f"{where}: rationale has {len(rationale)} entries but the post has "
                         f"{len(tokens)} tokens; give one 0/1 per token")
    if any(r not in (0, 1) for r in rationale):
        raise InputError(f"{where}: rationale entries must be 0 or 1")
    return np.asarray(rationale, dtype=np.int8)


def _words(tokens, rationale):
    """``(tokens, rationale)`` without the blank tokens ("" or spaces, no word to embed) and
    their rationale entries; None when no word is left (the post is dropped and counted)."""
    keep = [k for k, t in enumerate(tokens) if t.strip()]
    if not keep:
        return None
    return [tokens[k] for k in keep], rationale[keep]


def _label_id(where, label, layout):
    if label not in CLASSES[layout]:
        raise InputError(f"{where}: unknown label {label!r}; use one of "
                         f"{', '.join(CLASSES[layout])}")
    return CLASSES[layout].index(label)


def _read_jsonl(path, need_split):
    """(post_id, tokens, label id, rationale, orig_split) per line of the binary JSONL;
    ``need_split``: no split file, so every post needs an ``orig_split`` of :data:`SPLITS`."""
    rows, blank = [], 0
    for n, line in enumerate(_read_text(path, "HateXplain file").split("\n"), start=1):
        if not line.strip():
            continue
        where = f"HateXplain file {path} line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where} is not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not {"post_id", "tokens", "label"} <= set(obj):
            raise InputError(f"{where} needs the keys post_id, tokens and label (rationale "
                             "optional)")
        tokens, split = obj["tokens"], obj.get("orig_split")
        rationale = obj.get("rationale", [0] * len(tokens) if isinstance(tokens, list) else [])
        label, words = _label_id(where, obj["label"], "binary"), _words(
            tokens, _check_post(where, tokens, rationale))
        if words is None:
            blank += 1
        else:
            rows.append((str(obj["post_id"]), words[0], label, words[1], split))
        if need_split and split not in SPLITS:
            found = (f": orig_split {split!r} is not train, val or test" if "orig_split" in obj
                     else " has no orig_split")
            raise InputError(f"{where}{found}, and no post_id_divisions.json is beside the "
                             "file; give every post orig_split train, val or test (validation "
                             "-> val), or put the split file beside it")
    if not rows:
        raise InputError(f"HateXplain file {path} is empty; give the JSONL with one post a line")
    return rows, {"no word": blank} if blank else {}


def _votes(where, annotators):
    """Label id -> votes of a post's ``annotators``: a list of objects, each with a label."""
    if not isinstance(annotators, list) or not annotators or not all(
            isinstance(a, dict) and "label" in a for a in annotators):
        raise InputError(f"{where}: annotators must be a list of objects, each with a label, "
                         'as in the original dataset.json ([{"label": "normal", ...}, ...]); '
                         f"got {json.dumps(annotators)[:60]}")
    return collections.Counter(_label_id(where, a["label"], "original") for a in annotators)


def _read_original(path):
    """Rows of ``dataset.json``: majority label, majority-aggregated rationale."""
    data = _load_json(path, "HateXplain file")
    if not isinstance(data, dict) or not data:
        raise InputError(f"HateXplain file {path} must map post ids to posts "
                         "(the original dataset.json)")
    rows, undecided, blank = [], 0, 0
    for key, post in data.items():
        where = f"HateXplain file {path} post {key}"
        if not isinstance(post, dict) or not {"annotators", "post_tokens"} <= set(post):
            raise InputError(f"{where} needs the keys annotators, rationales, post_tokens")
        tokens = post["post_tokens"]
        _check_post(where, tokens, [0] * len(tokens) if isinstance(tokens, list) else [])
        votes = _votes(where, post["annotators"])
        label, count = votes.most_common(1)[0]
        if 2 * count <= sum(votes.values()):
            undecided += 1                 # no majority label: dropped, as HateXplain does
            continue
        given = post.get("rationales") or []             # a non-list fails _check_post
        lists = [_check_post(where, tokens, r) for r in (given if isinstance(given, list)
                                                         else [given])]
        marks = np.sum(lists, axis=0) if lists else np.zeros(len(tokens), dtype=np.int64)
        rationale = (2 * marks > len(lists)).astype(np.int8)        # strict majority
        if CLASSES["original"][label] == "normal":
            rationale[:] = 0               # a normal post has no true foreground
        words = _words(tokens, rationale)
        if words is None:
            blank += 1
            continue
        rows.append((str(post.get("post_id", key)), words[0], label, words[1], None))
    return rows, {"no majority label": undecided, **({"no word": blank} if blank else {})}


def read_hatexplain(path, divisions=None):
    r"""Read HateXplain (original ``dataset.json`` or the binary JSONL), V&R Section 5.

    Parameters
    ----------
    path : a file, or a folder holding ``hatexplain_binary.jsonl`` or ``dataset.json``
           (either may be gzipped, under its own name or with ``.gz`` added)
    divisions : ``post_id_divisions.json``; None: the one beside the file, if any (its
                post ids are strings, or integers compared as strings)

    Returns
    -------
    HateXplain with ``splits["train"|"val"|"test"]`` (posts not in any split dropped).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        names = [n for n in ("hatexplain_binary.jsonl", "dataset.json")
                 if os.path.exists(plain_or_gz(os.path.join(path, n)))]
        if not names:
            raise InputError(f"data_dir {path} holds neither hatexplain_binary.jsonl nor "
                             "dataset.json (plain or .gz); give the HateXplain folder",
                             param="data_dir")
        path = plain_or_gz(os.path.join(path, names[0]))
    if not os.path.exists(path):
        raise InputError(f"HateXplain file {path} does not exist; check --data-dir",
                         param="data_dir")
    if divisions is None:
        beside = plain_or_gz(os.path.join(os.path.dirname(path), "post_id_divisions.json"))
        divisions = beside if os.path.exists(beside) else None
    layout = "binary" if path.removesuffix(".gz").endswith(".jsonl") else "original"
    rows, dropped = (_read_jsonl(path, divisions is None) if layout == "binary"
                     else _read_original(path))
    if divisions is not None:
        table = _load_json(divisions, "split file")
        if not isinstance(table, dict) or not set(SPLITS) <= set(table):
            raise InputError(f"split file {divisions} must have the keys train, val, test")
        for s in SPLITS:
            if not isinstance(table[s], list) or not all(
                    isinstance(p, (str, int)) and not isinstance(p, bool) for p in table[s]):
                raise InputError(f"split file {divisions}: {s} must be a list of post ids "
                                 "(strings, as the post_id values of the data file)")
        split_of = {str(pid): s for s in SPLITS for pid in table[s]}
    elif layout == "binary":
        split_of = {r[0]: r[4] for r in rows}
    else:
        raise InputError(f"{path} needs post_id_divisions.json beside it (the official split)")
    parts = {s: [] for s in SPLITS}
    for row in rows:
        if split_of.get(row[0]) in parts:
            parts[split_of[row[0]]].append(row)
    dropped["not in a split"] = len(rows) - sum(map(len, parts.values()))
    if not parts["train"]:
        where = (f"listed under train in {divisions}; check that the split file's ids are "
                 "the post_id values of the data file" if divisions is not None else
                 "marked orig_split train; give the training posts orig_split train")
        raise InputError(f"no post of {path} is {where}")
    classes = CLASSES[layout]
    splits = {s: Posts([r[0] for r in p], [r[1] for r in p],
                       np.array([r[2] for r in p], dtype=np.int64), [r[3] for r in p], classes)
              for s, p in parts.items()}
    return HateXplain(splits, layout, dropped)
