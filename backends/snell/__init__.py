r"""Snell, Zhong, Klein & Steinhardt on torch: LSTM attention models and their probes.

* :mod:`.seq_models`: the seq2seq LSTM with dot attention and the BiLSTM classifier
  (Sec. 3, A.8), one model at a time;
* :mod:`.batched_lstm`: a hand-written LSTM whose weights carry a seed axis, so the
  20 seeds of a synthetic-task figure train as one model (Sec. 3.3, 5.2); the plain
  models above serve the real data sets;
* :mod:`.inputs`, :mod:`.train`, :mod:`.eval`: batches, training with uniform or
  learned attention, decoding and attention read-out;
* :mod:`.agreement`: a Table 2 row (A, Kendall tau, xi) from trained models;
* :mod:`.synthetic_train`, :mod:`.synthetic_experiments`: the copy, permutation,
  keyword and multi-head tasks.
"""
