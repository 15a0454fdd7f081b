"""A sweep of invalid ``attn-dyn`` invocations: each must end in ONE line on stderr
(``Error: ...``), exit status 2, no traceback, and nothing written.

``CASES`` is the table; ``tests/test_invalid_inputs.py`` runs it in-process
(CliRunner, fast). Run this file to sweep with real processes and a timeout
per case, and print one row per case:

    python tests/invalid_inputs.py               # every command
    python tests/invalid_inputs.py ode proxy     # only cases whose id starts so

Placeholders in an argument: ``{tmp}`` a scratch folder (also the working
directory), ``{out}`` = ``{tmp}/out`` (must not exist afterwards), ``{src}`` /
``{tgt}`` a small parallel corpus, ``{short}`` the corpus minus a line, ``{nul}``
NUL bytes, ``{ctrl}`` control characters only, ``{latin1}`` non-UTF-8 text,
``{empty}`` an empty file, ``{afile}`` an ordinary file, ``{cifar10}`` the shared
CIFAR-10 folder (cases skipped when absent), ``{ckpt_random}`` / ``{ckpt_cut}`` /
``{ckpt_torch}`` run folders holding a checkpoint of random bytes, a truncated
zip, and a torch checkpoint of another format; ``{hx_ok}`` / ``{hx_ratlen}`` /
``{hx_label}`` HateXplain folders: valid, one post whose rationale is shorter
than its tokens, one post with an unknown label; ``{hx_tokens_null}``,
``{hx_rationale_null}``, ``{hx_tokens_string}``, ``{hx_split_values}``,
``{hx_split_no_test}``: malformed HateXplain folders; ``{tsv}`` / ``{par}``
tiny classification / parallel folders for train-seq and agreement;
``{glove3}`` GloVe vectors of width 3, ``{glove4nan}`` of width 4 with a NaN;
``{syn_*}`` / ``{seq_*}`` / ``{agr_*}``
output folders of synthetic / train-seq / agreement holding a checkpoint (or
cache) of random bytes, a truncated one, or another command's.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from conftest import SHARED_DATA as SHARED  # noqa: E402 (the one path to ../shared/data)

NO_GPU = "cuda is absent"          # a case needing that no GPU is present


class Case(NamedTuple):
    id: str
    args: tuple
    needs: str = ""                # "cifar10", "no-gpu" or "torch"
    train: bool = False            # train rows: fixed by the train helper


def _c(id_, *args, needs="", train=False):
    return Case(id_, tuple(args), needs, train)


HX_TRAIN = ("train", "--backend", "torch", "--dataset", "hatexplain", "--device", "cpu",
            "--no-progress", "--data-dir")
SMALL_FF = ("--m", "4", "--classes", "3", "--epochs", "5", "--lr", "0.1")
PROXY = ("proxy", "--src", "{src}", "--tgt", "{tgt}", "--epochs", "1", "--min-count", "1")
IBM1 = ("ibm1", "--src", "{src}", "--tgt", "{tgt}")
TRAIN_SMALL = ("--epochs", "1", "--n-train", "20", "--n-test", "10", "--paradigm", "ha",
               "--no-progress")
SYN = ("synthetic", "copy-control", "--seeds", "1", "--steps", "2", "--hidden", "4", "--embed",
       "3", "--batch-size", "3", "--n-test", "4", "--eval-every", "1", "--no-progress")
SEQ = ("train-seq", "--dataset", "tsv", "--data-dir", "{tsv}", "--steps", "2", "--hidden", "4",
       "--emb", "4", "--eval-every", "1", "--device", "cpu", "--no-progress")
SEQ_MT = ("train-seq", "--dataset", "parallel", "--data-dir", "{par}", "--steps", "2",
          "--hidden", "4", "--out-hidden", "4", "--eval-every", "1", "--no-bleu", "--device",
          "cpu", "--no-progress")
AGR = ("agreement", *SEQ[1:], "--proxy-d", "4", "--proxy-epochs", "1")

CASES = [
    # ---- the group
    _c("group-unknown-command", "nosuchcommand"),
    _c("group-unknown-option", "--bogus"),
    # ---- ode
    _c("ode-t-eval-nan", "ode", "--t-eval", "nan", "--m", "5", "--classes", "3", "--out", "{out}"),
    _c("ode-t-eval-inf", "ode", "--t-eval", "inf", "--out", "{out}"),
    _c("ode-t-eval-negative", "ode", "--t-eval", "-1,2", "--out", "{out}"),
    _c("ode-t-eval-words", "ode", "--t-eval", "a,b", "--out", "{out}"),
    _c("ode-t-eval-empty", "ode", "--t-eval", ",", "--out", "{out}"),
    _c("ode-t-eval-unsorted", "ode", "--t-eval", "5,1", "--m", "5", "--classes", "3",
       "--out", "{out}"),
    _c("ode-t-eval-repeated", "ode", "--t-eval", "1,1", "--m", "5", "--classes", "3",
       "--out", "{out}"),
    _c("ode-m-astronomic", "ode", "--m", "99999999999999999999999", "--classes", "3",
       "--out", "{out}"),
    _c("ode-classes-astronomic", "ode", "--classes", "100000000000000000000", "--out", "{out}"),
    _c("ode-m-1", "ode", "--m", "1", "--out", "{out}"),
    _c("ode-m-text", "ode", "--m", "abc", "--out", "{out}"),
    _c("ode-classes-1", "ode", "--classes", "1", "--out", "{out}"),
    _c("ode-lr-0", "ode", "--simulate", "--lr", "0", "--out", "{out}"),
    _c("ode-lr-nan", "ode", "--lr", "nan", "--out", "{out}"),
    _c("ode-t-max-0", "ode", "--t-max", "0", "--out", "{out}"),
    _c("ode-t-max-inf", "ode", "--t-max", "inf", "--out", "{out}"),
    _c("ode-alpha-1.5", "ode", "--alpha", "1.5", "--out", "{out}"),
    _c("ode-alpha-nan", "ode", "--alpha", "nan", "--out", "{out}"),
    _c("ode-paradigm-hybrid", "ode", "--paradigm", "hybrid", "--out", "{out}"),
    _c("ode-paradigm-unknown", "ode", "--paradigm", "banana", "--out", "{out}"),
    _c("ode-paradigm-repeated", "ode", "--paradigm", "sa,soft", "--out", "{out}"),
    _c("ode-paradigm-empty", "ode", "--paradigm", ",", "--out", "{out}"),
    _c("ode-out-sys", "ode", "--m", "5", "--classes", "3", "--out", "/sys/kernel"),
    _c("ode-out-proc", "ode", "--m", "5", "--classes", "3", "--out", "/proc/attn-dyn"),
    _c("ode-out-file", "ode", "--m", "5", "--classes", "3", "--out", "{afile}"),
    _c("ode-out-under-file", "ode", "--m", "5", "--classes", "3", "--out", "{afile}/sub"),
    _c("ode-simulate-m-huge", "ode", "--simulate", "--m", "1000000", "--out", "{out}"),
    _c("ode-simulate-classes-huge", "ode", "--simulate", "--classes", "1000000",
       "--out", "{out}"),
    _c("ode-simulate-lr-tiny", "ode", "--simulate", "--lr", "1e-12", "--out", "{out}"),
    _c("ode-simulate-t-eval-huge", "ode", "--simulate", "--t-eval", "1e12", "--out", "{out}"),
    # ---- fixed-focus
    _c("ff-alphas-above-1", "fixed-focus", *SMALL_FF, "--alphas", "0.2,1.5", "--out", "{out}"),
    _c("ff-alphas-word", "fixed-focus", *SMALL_FF, "--alphas", "0.2,x", "--out", "{out}"),
    _c("ff-alphas-repeated", "fixed-focus", *SMALL_FF, "--alphas", "0.2,0.20", "--out", "{out}"),
    _c("ff-alphas-nan", "fixed-focus", *SMALL_FF, "--alphas", "nan", "--out", "{out}"),
    _c("ff-seed-negative", "fixed-focus", *SMALL_FF, "--seed", "-1", "--out", "{out}"),
    _c("ff-alphas-empty", "fixed-focus", *SMALL_FF, "--alphas", ",", "--out", "{out}"),
    _c("ff-paradigm-hybrid", "fixed-focus", *SMALL_FF, "--paradigm", "hybrid", "--out", "{out}"),
    _c("ff-paradigm-unknown", "fixed-focus", *SMALL_FF, "--paradigm", "x", "--out", "{out}"),
    _c("ff-linear-data-dir", "fixed-focus", *SMALL_FF, "--data-dir", "{tmp}", "--out", "{out}"),
    _c("ff-epochs-0", "fixed-focus", *SMALL_FF, "--epochs", "0", "--out", "{out}"),
    _c("ff-lr-negative", "fixed-focus", *SMALL_FF, "--lr", "-1", "--out", "{out}"),
    _c("ff-lr-inf", "fixed-focus", *SMALL_FF, "--lr", "inf", "--out", "{out}"),
    _c("ff-lr-diverges", "fixed-focus", *SMALL_FF, "--lr", "1e300", "--out", "{out}"),
    _c("ff-delta-0", "fixed-focus", *SMALL_FF, "--delta", "0", "--out", "{out}"),
    _c("ff-delta-nan", "fixed-focus", *SMALL_FF, "--delta", "nan", "--out", "{out}"),
    _c("ff-delta-2", "fixed-focus", *SMALL_FF, "--delta", "2", "--out", "{out}"),
    _c("ff-m-1", "fixed-focus", *SMALL_FF, "--m", "1", "--out", "{out}"),
    _c("ff-classes-1", "fixed-focus", *SMALL_FF, "--classes", "1", "--out", "{out}"),
    _c("ff-m-huge", "fixed-focus", "--m", "1000000", "--out", "{out}"),
    _c("ff-classes-huge", "fixed-focus", "--classes", "1000000", "--out", "{out}"),
    _c("ff-epochs-huge", "fixed-focus", "--epochs", "1000000000000", "--out", "{out}"),
    _c("ff-n-train-0", "fixed-focus", *SMALL_FF, "--n-train", "0", "--out", "{out}"),
    _c("ff-setting-unknown", "fixed-focus", "--setting", "mnist", "--out", "{out}"),
    _c("ff-cifar-no-data-dir", "fixed-focus", "--setting", "cifar10", "--out", "{out}"),
    _c("ff-cifar-missing-dir", "fixed-focus", "--setting", "cifar10", "--data-dir",
       "{tmp}/nope", "--out", "{out}"),
    _c("ff-cifar-classes-4", "fixed-focus", "--setting", "cifar10", "--data-dir", "{cifar10}",
       "--classes", "4", "--out", "{out}", needs="cifar10"),
    _c("ff-cifar-n-train-huge", "fixed-focus", "--setting", "cifar10", "--data-dir",
       "{cifar10}", "--n-train", "100000000", "--out", "{out}", needs="cifar10"),
    _c("ff-cifar-device-cuda", "fixed-focus", "--setting", "cifar10", "--data-dir", "{cifar10}",
       "--device", "cuda", "--n-train", "4", "--epochs", "1", "--out", "{out}",
       needs="cifar10,no-gpu"),
    _c("ff-out-sys", "fixed-focus", *SMALL_FF, "--out", "/sys/kernel"),
    _c("ff-out-file", "fixed-focus", *SMALL_FF, "--out", "{afile}"),
    # ---- ibm1
    _c("ibm1-no-src", "ibm1", "--tgt", "{tgt}"),
    _c("ibm1-src-missing", "ibm1", "--src", "{tmp}/nope.txt", "--tgt", "{tgt}"),
    _c("ibm1-src-folder", "ibm1", "--src", "{tmp}", "--tgt", "{tgt}"),
    _c("ibm1-nul-bytes", "ibm1", "--src", "{nul}", "--tgt", "{nul}", "--out", "{out}"),
    _c("ibm1-control-chars", "ibm1", "--src", "{ctrl}", "--tgt", "{ctrl}", "--out", "{out}"),
    _c("ibm1-not-utf8", "ibm1", "--src", "{latin1}", "--tgt", "{tgt}", "--out", "{out}"),
    _c("ibm1-empty", "ibm1", "--src", "{empty}", "--tgt", "{empty}", "--out", "{out}"),
    _c("ibm1-line-counts", "ibm1", "--src", "{src}", "--tgt", "{short}", "--out", "{out}"),
    _c("ibm1-iterations-0", *IBM1, "--iterations", "0", "--out", "{out}"),
    _c("ibm1-k-negative", *IBM1, "-k", "-1", "--out", "{out}"),
    _c("ibm1-iterations-huge", *IBM1, "--iterations", "10000000000", "--out", "{out}"),
    _c("ibm1-out-proc", *IBM1, "--out", "/proc/x.tsv"),
    _c("ibm1-out-sys", *IBM1, "--out", "/sys/kernel/x.tsv"),
    _c("ibm1-out-folder", *IBM1, "--out", "{tmp}"),
    _c("ibm1-out-under-file", *IBM1, "--out", "{afile}/x.tsv"),
    # ---- proxy
    _c("proxy-min-count-huge", *PROXY, "--min-count", "1000000", "--out", "{out}"),
    _c("proxy-min-count-0", *PROXY, "--min-count", "0", "--out", "{out}"),
    _c("proxy-dim-huge", *PROXY, "--dim", "100000000", "--out", "{out}"),
    _c("proxy-dim-0", *PROXY, "--dim", "0", "--out", "{out}"),
    _c("proxy-lr-diverges", *PROXY, "--lr", "1e30", "--out", "{out}"),
    _c("proxy-lr-0", *PROXY, "--lr", "0", "--out", "{out}"),
    _c("proxy-lr-nan", *PROXY, "--lr", "nan", "--out", "{out}"),
    _c("proxy-epochs-0", *PROXY, "--epochs", "0", "--out", "{out}"),
    _c("proxy-batch-size-0", *PROXY, "--batch-size", "0", "--out", "{out}"),
    _c("proxy-ibm-iterations-0", *PROXY, "--ibm-iterations", "0", "--out", "{out}"),
    _c("proxy-epochs-huge", *PROXY, "--epochs", "1000000000000", "--out", "{out}"),
    _c("proxy-ibm-iterations-huge", *PROXY, "--ibm-iterations", "1000000000000",
       "--out", "{out}"),
    _c("proxy-percent-0", *PROXY, "--percent", "0", "--out", "{out}"),
    _c("proxy-percent-101", *PROXY, "--percent", "101", "--out", "{out}"),
    _c("proxy-holdout-0", *PROXY, "--holdout", "0", "--out", "{out}"),
    _c("proxy-holdout-1", *PROXY, "--holdout", "1", "--out", "{out}"),
    _c("proxy-max-pairs-1", *PROXY, "--max-pairs", "1", "--out", "{out}"),
    _c("proxy-val-src-alone", *PROXY, "--val-src", "{src}", "--out", "{out}"),
    _c("proxy-tokenizer-unknown", *PROXY, "--tokenizer", "bpe", "--out", "{out}"),
    _c("proxy-nul-bytes", "proxy", "--src", "{nul}", "--tgt", "{tgt}", "--out", "{out}"),
    _c("proxy-seed-negative", *PROXY, "--seed", "-1", "--out", "{out}"),
    _c("proxy-out-sys", *PROXY, "--out", "/sys/kernel/r.json"),
    _c("proxy-out-folder", *PROXY, "--out", "{tmp}"),
    # ---- train (issue 9; fixed in the train helper's branch)
    _c("train-numpy-m-huge", "train", "--backend", "numpy", "--m", "1000000", "--out", "{out}",
       train=True),
    _c("train-numpy-n-train-huge", "train", "--backend", "numpy", "--n-train", "1000000000",
       "--out", "{out}", train=True),
    _c("train-m-huge", "train", "--m", "1000000", "--out", "{out}", needs="torch", train=True),
    _c("train-data-seed-negative", "train", "--data-seed", "-1", *TRAIN_SMALL, "--out", "{out}",
       needs="torch", train=True),
    _c("train-pixels-not-cifar", "train", "--pixels", "half", *TRAIN_SMALL, "--out", "{out}",
       needs="torch", train=True),
    _c("train-test-images-not-cifar", "train", "--test-images", "train", *TRAIN_SMALL, "--out",
       "{out}", needs="torch", train=True),
    _c("train-pixels-unknown", "train", "--pixels", "unit", "--out", "{out}", train=True),
    _c("train-cifar-n-test-huge", "train", "--dataset", "cifar10", "--data-dir", "{cifar10}",
       "--n-test", "100000", "--out", "{out}", needs="cifar10,torch", train=True),
    _c("train-numpy-lr-diverges", "train", "--backend", "numpy", "--lr", "1e30", *TRAIN_SMALL,
       "--out", "{out}", train=True),
    _c("train-torch-lr-diverges", "train", "--lr", "1e6", *TRAIN_SMALL, "--out", "{out}",
       needs="torch", train=True),
    _c("train-resume-random-bytes", "train", "--resume", *TRAIN_SMALL, "--out", "{ckpt_random}",
       needs="torch", train=True),
    _c("train-resume-truncated", "train", "--resume", *TRAIN_SMALL, "--out", "{ckpt_cut}",
       needs="torch", train=True),
    _c("train-numpy-resume-torch-run", "train", "--backend", "numpy", "--resume", *TRAIN_SMALL,
       "--out", "{ckpt_torch}", needs="torch", train=True),
    _c("train-out-sys", "train", *TRAIN_SMALL, "--out", "/sys/kernel", train=True),
    _c("train-epochs-0", "train", "--epochs", "0", "--out", "{out}", train=True),
    _c("train-first-seed-astronomic", "train", "--first-seed", "99999999999999999999999",
       *TRAIN_SMALL, "--out", "{out}", train=True),
    _c("train-m-1", "train", "--m", "1", "--out", "{out}", train=True),
    _c("train-paradigm-unknown", "train", "--paradigm", "banana", "--out", "{out}", train=True),
    _c("train-cifar-missing-dir", "train", "--dataset", "cifar10", "--data-dir", "data/cifar10",
       "--out", "{out}", train=True),
    _c("train-device-cuda", "train", "--device", "cuda", *TRAIN_SMALL, "--out", "{out}",
       needs="torch,no-gpu", train=True),
    # ---- train --dataset hatexplain (issue 13; train-text is its alias) and --task (train-seq's)
    _c("hx-rationale-length", *HX_TRAIN, "{hx_ratlen}", "--out", "{out}", needs="torch"),
    _c("hx-unknown-label", *HX_TRAIN, "{hx_label}", "--out", "{out}", needs="torch"),
    _c("hx-text-unknown-label", "train-text", "--data-dir", "{hx_label}", "--out", "{out}",
       needs="torch"),
    _c("hx-missing-dir", *HX_TRAIN, "{tmp}/nope", "--out", "{out}", needs="torch"),
    _c("hx-embedding-unknown", *HX_TRAIN, "{hx_ok}", "--embedding", "lstm", "--out", "{out}"),
    _c("hx-epochs-0", *HX_TRAIN, "{hx_ok}", "--epochs", "0", "--out", "{out}", needs="torch"),
    _c("hx-lr-unknown-paradigm", *HX_TRAIN, "{hx_ok}", "--lr", "bogus=0.1", "--out", "{out}",
       needs="torch"),
    _c("hx-lr-negative", *HX_TRAIN, "{hx_ok}", "--lr", "sa=-1", "--out", "{out}",
       needs="torch"),
    _c("hx-switch-epoch-past-end", *HX_TRAIN, "{hx_ok}", "--epochs", "2", "--switch-epoch",
       "5", "--out", "{out}", needs="torch"),
    _c("hx-switch-epoch-words", *HX_TRAIN, "{hx_ok}", "--switch-epoch", "soon", "--out",
       "{out}", needs="torch"),
    _c("hx-resume-without-out", *HX_TRAIN, "{hx_ok}", "--resume", needs="torch"),
    _c("hx-out-sys", *HX_TRAIN, "{hx_ok}", "--out", "/sys/kernel", needs="torch"),
    _c("hx-resume-random-bytes", *HX_TRAIN, "{hx_ok}", "--paradigm", "ha", "--epochs", "1",
       "--min-count", "1", "--resume", "--out", "{ckpt_random}", needs="torch"),
    _c("train-task-is-train-seqs", "train", "--task", "classify", "--backend", "torch",
       "--dataset", "tsv", "--data-dir", "{tmp}/nope", "--out", "{out}"),
    _c("hx-mosaic-option", *HX_TRAIN, "{hx_ok}", "--n-train", "10", "--out", "{out}"),
    _c("train-embedding-for-mosaics", "train", "--embedding", "standard", "--out", "{out}"),
    # ---- issue 20: the newer commands and train options
    _c("train-lr-repeated", "train", "--lr", "sa=0.1,sa=0.2", "--out", "{out}"),
    _c("train-lr-two-numbers", "train", "--lr", "0.1,0.2", "--out", "{out}"),
    _c("train-numpy-protocol-paper", "train", "--backend", "numpy", "--protocol", "paper",
       "--out", "{out}"),
    _c("train-resume-without-out", "train", "--resume", *TRAIN_SMALL),
    _c("train-device-nonsense", "train", "--device", "nonsense", *TRAIN_SMALL, "--out", "{out}",
       needs="torch"),
    _c("train-batch-seeds-huge", "train", "--batch-seeds", "--seeds", "1000000", "--out",
       "{out}", needs="torch"),
    _c("train-epochs-huge", "train", "--backend", "numpy", "--epochs", "100000000000000",
       "--out", "{out}"),
    _c("train-seeds-huge", "train", "--backend", "numpy", "--seeds", "100000000000000",
       "--out", "{out}"),
    _c("train-cifar-data-dir-file", "train", "--dataset", "cifar10", "--data-dir", "{afile}",
       "--out", "{out}", needs="torch"),
    _c("hx-tokens-null", *HX_TRAIN, "{hx_tokens_null}", "--out", "{out}", needs="torch"),
    _c("hx-rationale-null", *HX_TRAIN, "{hx_rationale_null}", "--out", "{out}", needs="torch"),
    _c("hx-tokens-string", *HX_TRAIN, "{hx_tokens_string}", "--out", "{out}", needs="torch"),
    _c("hx-split-values-not-lists", *HX_TRAIN, "{hx_split_values}", "--out", "{out}",
       needs="torch"),
    _c("hx-split-no-test", *HX_TRAIN, "{hx_split_no_test}", "--out", "{out}", needs="torch"),
    _c("hx-lr-repeated", *HX_TRAIN, "{hx_ok}", "--lr", "sa=0.1,sa=0.2", "--out", "{out}",
       needs="torch"),
    _c("hx-device-nonsense", *HX_TRAIN[:-4], "--device", "nonsense", "--no-progress",
       "--data-dir", "{hx_ok}", "--out", "{out}", needs="torch"),
    _c("hx-epochs-huge", *HX_TRAIN, "{hx_ok}", "--epochs", "1000000000000", "--out", "{out}",
       needs="torch"),
    _c("hx-seeds-huge", *HX_TRAIN, "{hx_ok}", "--seeds", "1000000000000", "--out", "{out}",
       needs="torch"),
    _c("hx-out-file", *HX_TRAIN, "{hx_ok}", "--out", "{afile}", needs="torch"),
    _c("syn-resume-random-bytes", *SYN, "--resume", "--out", "{syn_random}", needs="torch"),
    _c("syn-resume-truncated", *SYN, "--resume", "--out", "{syn_cut}", needs="torch"),
    _c("syn-resume-other-command", *SYN, "--resume", "--out", "{syn_foreign}", needs="torch"),
    _c("syn-multihead-resume-random-bytes", "synthetic", "multihead", *SYN[2:], "--heads",
       "2", "--pool", "2", "--resume", "--out", "{syn_random}", needs="torch"),
    _c("syn-head-pool-random-bytes", "synthetic", "multihead", *SYN[2:], "--heads", "2",
       "--pool", "2", "--out", "{syn_pool}", needs="torch"),
    _c("syn-hidden-huge", *SYN, "--hidden", "300000", "--out", "{out}", needs="torch"),
    _c("syn-seeds-huge", *SYN, "--seeds", "10000000", "--out", "{out}", needs="torch"),
    _c("syn-steps-huge", *SYN, "--steps", "1000000000000", "--out", "{out}", needs="torch"),
    _c("syn-n-test-huge", *SYN, "--n-test", "1000000000000", "--out", "{out}", needs="torch"),
    _c("syn-first-seed-negative", *SYN, "--first-seed", "-1", "--out", "{out}", needs="torch"),
    _c("syn-device-nonsense", *SYN, "--device", "nonsense", "--out", "{out}", needs="torch"),
    _c("syn-lr-inf", *SYN, "--lr", "inf", "--out", "{out}", needs="torch"),
    _c("syn-lr-nan", *SYN, "--lr", "nan", "--out", "{out}", needs="torch"),
    _c("syn-lr-diverges", *SYN, "--lr", "1e20", "--steps", "6", "--out", "{out}",
       needs="torch"),
    _c("syn-lr-overflows", *SYN, "--lr", "3e38", "--steps", "6", "--out", "{out}",
       needs="torch"),
    _c("syn-out-file", *SYN, "--out", "{afile}", needs="torch"),
    _c("seq-seed-astronomic", *SEQ, "--seed", "99999999999999999999999", "--out", "{out}",
       needs="torch"),
    _c("syn-first-seed-astronomic", *SYN, "--first-seed", "99999999999999999999999", "--out",
       "{out}", needs="torch"),
    _c("seq-checkpoint-random-bytes", *SEQ, "--out", "{seq_random}", needs="torch"),
    _c("seq-checkpoint-truncated", *SEQ, "--out", "{seq_cut}", needs="torch"),
    _c("seq-checkpoint-other-command", *SEQ, "--out", "{seq_foreign}", needs="torch"),
    _c("seq-hidden-huge", *SEQ, "--hidden", "1000000", "--out", "{out}", needs="torch"),
    _c("seq-steps-huge", *SEQ, "--steps", "1000000000000", "--out", "{out}", needs="torch"),
    _c("seq-seed-negative", *SEQ, "--seed", "-1", "--out", "{out}", needs="torch"),
    _c("seq-device-nonsense", *SEQ, "--device", "nonsense", "--out", "{out}", needs="torch"),
    _c("seq-vocab-size-0", *SEQ_MT, "--vocab-size", "0", "--out", "{out}", needs="torch"),
    _c("seq-vocab-size-too-small", *SEQ_MT, "--vocab-size", "6", "--out", "{out}",
       needs="torch"),
    _c("seq-embeddings-wrong-width", *SEQ, "--embeddings", "{glove3}", "--out", "{out}",
       needs="torch"),
    _c("seq-embeddings-nan", *SEQ, "--embeddings", "{glove4nan}", "--out", "{out}",
       needs="torch"),
    _c("seq-embeddings-missing", *SEQ, "--embeddings", "{tmp}/nope.txt", "--out", "{out}",
       needs="torch"),
    _c("seq-embeddings-not-utf8", *SEQ, "--embeddings", "{latin1}", "--out", "{out}",
       needs="torch"),
    _c("seq-data-dir-file", *SEQ[:4], "{afile}", *SEQ[5:], "--out", "{out}", needs="torch"),
    _c("seq-out-file", *SEQ, "--out", "{afile}", needs="torch"),
    _c("seq-lr-diverges", *SEQ, "--lr", "1e20", "--steps", "4", "--out", "{out}",
       needs="torch"),
    _c("seq-lr-overflows", *SEQ, "--lr", "3e38", "--steps", "4", "--out", "{out}",
       needs="torch"),
    _c("seq-max-train-0", *SEQ, "--max-train", "0", "--out", "{out}", needs="torch"),
    _c("seq-switch-step-without-hybrid", *SEQ, "--paradigm", "lv", "--switch-step", "1",
       "--out", "{out}", needs="torch"),
    _c("seq-switch-step-default-sa", *SEQ, "--switch-step", "auto", "--out", "{out}",
       needs="torch"),
    _c("seq-emb-translate", *SEQ_MT, "--emb", "6", "--out", "{out}", needs="torch"),
    _c("agr-switch-step-without-hybrid", *AGR, "--switch-step", "1", "--out", "{out}",
       needs="torch"),
    _c("syn-switch-step-without-hybrid", *SYN, "--paradigm", "ha", "--switch-step", "1",
       "--out", "{out}", needs="torch"),
    _c("seq-hx-tokens-null", *SEQ[:2], "hatexplain", "--data-dir", "{hx_tokens_null}",
       *SEQ[5:], "--out", "{out}", needs="torch"),
    _c("seq-hx-tokens-string", *SEQ[:2], "hatexplain", "--data-dir", "{hx_tokens_string}",
       *SEQ[5:], "--out", "{out}", needs="torch"),
    _c("agr-checkpoint-random-bytes", *AGR, "--out", "{agr_random}", needs="torch"),
    _c("agr-proxy-d-huge", *AGR, "--proxy-d", "100000000", "--out", "{out}", needs="torch"),
    _c("agr-proxy-epochs-huge", *AGR, "--proxy-epochs", "1000000000000000", "--out", "{out}",
       needs="torch"),
    _c("agr-hidden-huge", *AGR, "--hidden", "1000000", "--out", "{out}", needs="torch"),
    _c("agr-seed-negative", *AGR, "--seed", "-1", "--out", "{out}", needs="torch"),
    _c("agr-device-nonsense", *AGR, "--device", "nonsense", "--out", "{out}", needs="torch"),
    _c("agr-embeddings-missing", *AGR, "--embeddings", "{tmp}/nope.txt", "--out", "{out}",
       needs="torch"),
    _c("agr-data-dir-file", *AGR[:4], "{afile}", *AGR[5:], "--out", "{out}", needs="torch"),
    _c("agr-out-file", *AGR, "--out", "{afile}", needs="torch"),
]

SRC_LINES = [f"the {a} {b} is {c} ." for a in ("small", "big", "red", "old")
             for b in ("house", "book", "car") for c in ("here", "there", "new")]
TGT_LINES = [s.replace("the", "das").replace("house", "haus") for s in SRC_LINES]


def prepare(tmp):
    """Create the input files of the placeholders in ``tmp``; return the substitutions."""
    tmp = Path(tmp)
    files = {"src": "\n".join(SRC_LINES) + "\n", "tgt": "\n".join(TGT_LINES) + "\n",
             "short": "\n".join(TGT_LINES[:-1]) + "\n", "ctrl": "\x01\x02\n\x03\n",
             "empty": "", "afile": "x"}
    subs = {"tmp": str(tmp), "out": str(tmp / "out"), "cifar10": str(SHARED / "cifar10")}
    for name, text in files.items():
        (tmp / f"{name}.txt").write_text(text, encoding="utf-8")
        subs[name] = str(tmp / f"{name}.txt")
    (tmp / "nul.txt").write_bytes(b"\x00" * 300)
    (tmp / "latin1.txt").write_bytes("gro\xdfes haus\n".encode("latin-1") * len(SRC_LINES))
    subs.update(nul=str(tmp / "nul.txt"), latin1=str(tmp / "latin1.txt"))
    for name, payload in (("ckpt_random", os.urandom(4096)),
                          ("ckpt_cut", b"PK\x03\x04" + os.urandom(60))):
        (tmp / name / "checkpoints").mkdir(parents=True)
        (tmp / name / "checkpoints" / "ha_seed0.ckpt").write_bytes(payload)
        subs[name] = str(tmp / name)
    subs["ckpt_torch"] = str(tmp / "ckpt_torch")
    for name, bad in (("hx_ok", {}), ("hx_ratlen", {"rationale": [1]}),
                      ("hx_label", {"label": "spam"}), ("hx_tokens_null", {"tokens": None}),
                      ("hx_rationale_null", {"rationale": None}),
                      ("hx_tokens_string", {"tokens": "you are bad"}),
                      ("hx_split_values", {}), ("hx_split_no_test", {})):
        (tmp / name).mkdir()
        (tmp / name / "hatexplain_binary.jsonl").write_text("".join(
            json.dumps(dict(row, **(bad if k == 3 else {}))) + "\n"
            for k, row in enumerate(HX_ROWS)))
        subs[name] = str(tmp / name)
    ids = [row["post_id"] for row in HX_ROWS]
    for name, table in (("hx_split_values", {"train": "p0", "val": 3, "test": None}),
                        ("hx_split_no_test", {"train": ids, "val": [], "test": []})):
        (tmp / name / "post_id_divisions.json").write_text(json.dumps(table))
    _text_folders(tmp, subs)
    for prefix, path in (("syn", "checkpoints/train.ckpt"), ("seq", "checkpoint.pt"),
                         ("agr", "runs/standard/checkpoint.pt"),
                         ("syn_pool", "head_pool.json")):
        for kind, payload in (("random", os.urandom(4096)),
                              ("cut", b"PK\x03\x04" + os.urandom(60))):
            if prefix == "syn_pool" and kind == "cut":
                continue
            folder = tmp / (prefix if prefix == "syn_pool" else f"{prefix}_{kind}")
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(payload)
            subs[folder.name] = str(folder)
    return subs


def _text_folders(tmp, subs):
    """``{tsv}``, ``{par}`` (tiny data sets), ``{glove3}`` (vectors of width 3) and
    ``{glove4nan}`` (width 4, a NaN in the first)."""
    (tmp / "tsv").mkdir()
    for split, rows in (("train", 30), ("dev", 10)):
        (tmp / "tsv" / f"{split}.tsv").write_text("".join(
            f"{SRC_LINES[k % len(SRC_LINES)]}\t{k % 2}\n" for k in range(rows)))
    (tmp / "par").mkdir()
    for split, lines in (("train", slice(0, 30)), ("val", slice(30, 36))):
        for side, text in (("src", SRC_LINES), ("tgt", TGT_LINES)):
            (tmp / "par" / f"{split}.{side}").write_text("\n".join(text[lines]) + "\n")
    (tmp / "glove3.txt").write_text("the 0.1 0.2 0.3\nhouse 0.4 0.5 0.6\n")
    (tmp / "glove4nan.txt").write_text("the 0.1 nan 0.3 0.2\nhouse 0.4 0.5 0.6 0.7\n")
    subs.update(tsv=str(tmp / "tsv"), par=str(tmp / "par"), glove3=str(tmp / "glove3.txt"),
                glove4nan=str(tmp / "glove4nan.txt"))


HX_ROWS = [{"post_id": f"p{k}", "tokens": ["you", "are", "bad" if k % 2 else "nice"],
            "rationale": [0, 0, k % 2], "label": "toxic" if k % 2 else "non-toxic",
            "orig_split": "train" if k < 6 else "test"} for k in range(8)]


def prepare_torch_checkpoint(subs):
    """A torch-format checkpoint a numpy run must refuse (needs torch)."""
    import torch

    folder = Path(subs["ckpt_torch"]) / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": 1, "model": {}}, folder / "ha_seed0.ckpt")
    # another command's checkpoint: train-seq's in synthetic's place and vice versa
    for name, path, state in (("syn_foreign", "checkpoints/train.ckpt",
                               {"format": 2, "kind": "seq", "config": {}}),
                              ("seq_foreign", "checkpoint.pt",
                               {"format": 2, "kind": "synthetic", "meta": {}})):
        target = Path(subs["tmp"]) / name / path
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, target)
        subs[name] = str(target.parents[len(Path(path).parts) - 1])


def missing_need(case):
    """Why ``case`` cannot run here, or ''."""
    for need in filter(None, case.needs.split(",")):
        if need == "cifar10" and not (SHARED / "cifar10").is_dir():
            return f"shared CIFAR-10 not found at {SHARED / 'cifar10'}"
        if need in ("torch", "no-gpu"):
            try:
                import torch
            except ImportError:
                return "torch is not installed"
            if need == "no-gpu" and torch.cuda.is_available():
                return "a GPU is present (the case needs its absence)"
    return ""


def argv(case, subs):
    return [a.format(**subs) for a in case.args]


def snapshot(tmp):
    """Every path under ``tmp`` with its size and modification time."""
    out = {}
    for root, dirs, files in os.walk(tmp):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            out[path] = (st.st_size, st.st_mtime_ns)
    return out


def problems(rc, stderr, before, after, subs):
    """What is wrong with one case's outcome (empty list: handled as promised)."""
    found = []
    lines = [line for line in stderr.splitlines() if line.strip()]
    if rc != 2:
        found.append(f"exit status {rc}, not 2")
    if "Traceback" in stderr:
        found.append("traceback")
    if len(lines) != 1 or not lines[0].startswith("Error: "):
        found.append(f"{len(lines)} stderr lines: {stderr.strip()[:300]!r}")
    if before != after:
        changed = sorted(set(after) ^ set(before)) + sorted(
            p for p in set(after) & set(before) if after[p] != before[p])
        found.append(f"wrote {changed[:3]}")
    return found


def run_subprocess(case, subs, timeout=120):
    """Run one case as a real process in ``{tmp}``; return (rc, stderr)."""
    cmd = [sys.executable, "-m", "minimal_attn.cli.main", *argv(case, subs)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        p = subprocess.run(cmd, cwd=subs["tmp"], capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f"still running after {timeout} s (never refused?)"
    return p.returncode, p.stderr


def main(prefixes):
    import tempfile

    ok = bad = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        subs = prepare(tmp)
        if not missing_need(Case("", (), "torch")):
            prepare_torch_checkpoint(subs)
        for case in CASES:
            if prefixes and not case.id.startswith(tuple(prefixes)):
                continue
            why = missing_need(case)
            if why:
                skipped += 1
                print(f"SKIP {case.id}: {why}")
                continue
            before = snapshot(tmp)
            rc, stderr = run_subprocess(case, subs)
            found = problems(rc, stderr, before, snapshot(tmp), subs)
            ok, bad = ok + (not found), bad + bool(found)
            print(f"{'ok  ' if not found else 'FAIL'} {case.id}"
                  + (f": {'; '.join(found)}" if found else f": {stderr.strip()[:110]}"))
    print(f"{ok} handled, {bad} not, {skipped} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
