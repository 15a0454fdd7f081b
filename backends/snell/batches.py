r"""A split's token ids as padded tensors on the device, built once: a batch is an index.

:func:`.eval.pad_batch` builds a batch from a Python list of id arrays, and the
readable :func:`.eval.loss_on_batch` calls it at every step; on a GPU that is a
loop over the examples, three host-to-device copies and a wait for the card at
every step. :class:`SplitTensors` pads the whole split once; :meth:`~SplitTensors.batch`
cuts examples ``idx`` out of it, to the longest of them, which gives the very
tensors ``pad_batch`` gives (``tests/test_seq_batches.py``). The lengths stay on
the host as well: the maximum length, and the packing of the LSTMs
(:func:`.seq_models._encode`), need them there, and reading them back from the
card would make the host wait for it.
"""

from typing import NamedTuple, Optional

import numpy as np
import torch

BOS = 1                        # <s>: the decoder's first input (datasets.seq)


class SeqBatch(NamedTuple):
    """One batch; ``lengths`` on the host (CPU int64), every other tensor on the device."""

    x: torch.Tensor                  # (B, L) source ids, padded with pad_id
    lengths: torch.Tensor            # (B,) source lengths, on the CPU
    y: torch.Tensor                  # classify: (B,) labels; translate: (B, T) targets
    y_in: Optional[torch.Tensor]     # translate: (B, T) <s> y_1 .. y_{T-1}
    y_len: Optional[torch.Tensor]    # translate: (B,) target lengths, on the device


def padded(seqs, pad_id):
    """(N, L_max) int64 array of ``seqs`` padded with ``pad_id``, and the lengths (N,)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    out = np.full((len(seqs), max(int(lengths.max(initial=0)), 1)), pad_id, dtype=np.int64)
    if lengths.sum():
        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs])
        starts = np.cumsum(lengths) - lengths
        out[np.repeat(np.arange(len(seqs)), lengths),
            np.arange(ids.shape[0]) - np.repeat(starts, lengths)] = ids
    return out, lengths


def shifted(y, lengths, pad_id):
    """Decoder inputs ``<s> y_1 .. y_{T-1}`` of padded targets y (N, T) of ``lengths``."""
    y_in = np.full_like(y, pad_id)
    y_in[:, 0], y_in[:, 1:] = BOS, y[:, :-1]
    y_in[np.arange(y.shape[1])[None, :] >= np.maximum(lengths, 1)[:, None]] = pad_id
    return y_in


def to_device(array, device):
    """A host array on ``device`` without waiting for the card (pinned, non-blocking copy)."""
    t = torch.as_tensor(array)
    if torch.device(device).type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


class SplitTensors:
    """The examples ``src``, ``tgt`` of one split of ``task``, padded once on ``device``."""

    def __init__(self, task, src, tgt, device):
        self.task, self.device, self._tgt, self._refs = task.task, device, tgt, {}
        x, self.src_len = padded(src, task.pad_id)
        self.x = torch.as_tensor(x).to(device)                           # (N, L_max)
        if task.task == "classify":
            self.y = torch.tensor(np.array([int(t[0]) for t in tgt]), dtype=torch.float32,
                                  device=device)                         # (N,)
            return
        y, self.tgt_len = padded(tgt, task.pad_id)
        y_in = shifted(y, self.tgt_len, task.pad_id)
        self.y, self.y_in = (torch.as_tensor(a).to(device) for a in (y, y_in))  # (N, T_max)
        self.y_len = torch.as_tensor(self.tgt_len).to(device)

    def references(self, task, n):
        """The first ``n`` detokenised targets without ``</s>`` (BLEU's references), decoded
        once, not at every evaluation."""
        if n not in self._refs:
            self._refs[n] = [task.decode(t[:-1]) for t in self._tgt[:n]]
        return self._refs[n]

    def __len__(self):
        return len(self.src_len)

    def batch(self, idx):
        """The examples ``idx`` (int array) cut to their longest source and target."""
        idx = np.asarray(idx, dtype=np.int64)
        L = int(self.src_len[idx].max())
        rows = to_device(idx, self.device)
        x = self.x[:, :L].index_select(0, rows)                          # (B, L)
        lengths = torch.as_tensor(self.src_len[idx])
        if self.task == "classify":
            return SeqBatch(x, lengths, self.y.index_select(0, rows), None, None)
        T = int(self.tgt_len[idx].max())
        return SeqBatch(x, lengths, self.y[:, :T].index_select(0, rows),
                        self.y_in[:, :T].index_select(0, rows), self.y_len.index_select(0, rows))
