"""GloVe-format embeddings copied into a Snell model (backends/snell/inputs.py)."""

import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell.inputs import load_embeddings  # noqa: E402


def test_vectors_fill_known_words_and_odd_lines_are_reported(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("good 1 2 3\nNew York 4 5 6\nbad 7 8 9\nunseen 0 0 0\nshort 1 2\n",
                    encoding="utf-8")
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(4, 3)
    said = []
    found = load_embeddings(model, path, ["<unk>", "good", "bad", "short"], log=said.append)
    assert found == 2
    assert model.embed.weight[1].tolist() == [1.0, 2.0, 3.0]
    assert model.embed.weight[2].tolist() == [7.0, 8.0, 9.0]
    # "New York 4 5 6" splits into 4 values and "short 1 2" into 2: both skipped, and said
    assert len(said) == 1 and "skipped 2 line(s)" in said[0] and "'New'" in said[0]
