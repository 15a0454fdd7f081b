"""beta^uf and beta^px on longer inputs (issue 21): one known keyword, lengths 10 to 80.

A positive input is ``L - 1`` filler words and the keyword ``good`` at a random
position, a negative one ``L`` filler words (the keyword toy of Snell Sec. 6.1),
written as the ``tsv`` data set a user would give ``attn-dyn agreement``. On the
positives both probes must peak on the keyword: the uniform-attention model's
beta^uf (Snell Eq. (9), A.7) and the proxy's beta^px (Snell Eq. (6)).
(With a second keyword for the negatives a model may learn only one of the two
and classify by its absence, so the other class's beta^uf peaks anywhere.)
The row goes through the whole pipeline (reader, padding, batching,
evaluation, proxy, table), so any misalignment of
positions or token ids between the two (padding on the wrong side, truncation,
other ids for the proxy) drops A(beta^uf, beta^px) towards the baseline.
"""

import numpy as np
import pytest

pytest.importorskip("torch")

from minimal_attn import agreement  # noqa: E402
from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement  # noqa: E402
from minimal_attn.backends.snell.run_files import load_rows, load_run  # noqa: E402

FILLERS = [f"w{i}" for i in range(20)]


def _keyword_tsv(folder, length, rng):
    """Writes train.tsv and dev.tsv; returns the keyword's position in each dev input (-1: none)."""
    folder.mkdir()
    for name, n in (("train.tsv", 240), ("dev.tsv", 40)):
        rows, where = [], []
        for i in range(n):
            words = list(rng.choice(FILLERS, length - i % 2))
            where.append(int(rng.integers(length)) if i % 2 else -1)
            if i % 2:
                words.insert(where[-1], "good")
            rows.append(" ".join(words) + f"\t{i % 2}")
        (folder / name).write_text("text\tlabel\n" + "\n".join(rows) + "\n")
    return np.array(where)


@pytest.mark.parametrize("length", [10, 20, 40, 80])
def test_beta_uf_and_beta_px_meet_on_the_keyword(tmp_path, torch_one_thread, length):
    rng = np.random.default_rng(length)
    keyword_at = _keyword_tsv(tmp_path / "data", length, rng)
    config = AgreementConfig(task="classify", dataset="tsv", data_dir=str(tmp_path / "data"),
                             steps=40, hidden=16, emb=16, lr=1e-2, batch_size=16, eval_every=10,
                             proxy_d=16, proxy_epochs=5, frozen=False, logistic=False,
                             kendall=False, device="cpu")
    result = run_agreement(config, str(tmp_path / "out"))
    history, evals = load_run(str(tmp_path / "out" / "runs" / "uniform"))
    beta_px = load_rows(str(tmp_path / "out" / "proxy.npz"))["val_beta_px"]
    pos = np.flatnonzero(keyword_at >= 0)
    # the proxy knows the keyword: its top position is the keyword in every positive
    assert [int(np.argmax(beta_px[i][0])) for i in pos] == keyword_at[pos].tolist()
    on_keyword, scores = [], []
    for h in history:                           # every checkpoint of the uniform model
        beta_uf = evals[h["step"]]["val_beta"]
        assert [b.shape for b in beta_uf] == [(1, length)] * 40 == [b.shape for b in beta_px]
        on_keyword.append(np.mean([int(np.argmax(beta_uf[i][0])) for i in pos]
                                  == keyword_at[pos]))
        scores.append(agreement.average_agreement([beta_uf[i] for i in pos],
                                                  [beta_px[i] for i in pos], kendall=False))
    # A.7 takes the best checkpoint: trained on, the keyword's information spreads to
    # other positions (Snell Sec. 6.1; docs/paper2_neural.md), so only early ones must agree
    best = int(np.argmax(on_keyword))
    assert on_keyword[best] >= 0.8, (length, on_keyword)
    assert scores[best]["baseline"] < 0.15 and scores[best]["agreement"] >= 0.8, (length, scores)
    assert on_keyword[0] < 0.5                  # at initialisation beta^uf knows nothing
    assert len(result["curves"]["A_beta_uf_beta_px"]) == len(history)


def test_cached_proxy_is_refitted_when_the_ids_change():
    """proxy.npz is reused only for the same token ids, not merely the same sizes."""
    from minimal_attn.backends.snell.agreement import proxy_key
    from minimal_attn.datasets.seq import TextTask

    def task(first):
        src = [np.array([first, 4, 5]), np.array([4, 5, 6])]
        return TextTask("classify", src, [np.array([1]), np.array([0])], src[:1],
                        [np.array([1])], n_vocab=8, n_out=2, itos=list("abcdefgh"),
                        info={"n_train": 2})
    config = AgreementConfig()
    assert proxy_key(task(3), config) == proxy_key(task(3), config)
    assert proxy_key(task(3), config) != proxy_key(task(7), config)
