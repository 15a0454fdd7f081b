"""GloVe-format embeddings copied into a Snell model (backends/snell/inputs.py)."""

import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell.inputs import embeddings_hash, load_embeddings  # noqa: E402


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


def _train_seq(data, out, steps, embeddings=None):
    from click.testing import CliRunner

    from minimal_attn.cli.main import cli

    return CliRunner().invoke(cli, [
        "train-seq", "--dataset", "tsv", "--data-dir", str(data), "--steps", str(steps),
        "--hidden", "4", "--emb", "3", "--eval-every", "2", "--device", "cpu", "--threads", "1",
        "--no-progress", "--out", str(out),
        *(["--embeddings", str(embeddings)] if embeddings else [])])


def test_a_resume_with_other_vectors_is_refused_and_the_same_file_elsewhere_goes_on(tmp_path):
    # the vectors are copied in only when a model starts: a resume that took other ones (or
    # none) would silently keep the first, so the checkpoint's data names the file's content
    data = tmp_path / "tsv"
    data.mkdir()
    rows = [f"the {a} film\t{k % 2}" for k, a in enumerate("good bad fine dull nice poor".split())]
    (data / "train.tsv").write_text("\n".join(rows * 3) + "\n")
    (data / "dev.tsv").write_text("\n".join(rows) + "\n")
    glove, other, copy = (tmp_path / n for n in ("glove.txt", "other.txt", "copy.txt"))
    glove.write_text("good 1 2 3\nbad 4 5 6\n")
    other.write_text("good 1 2 3\nbad 4 5 7\n")            # one value differs
    copy.write_text(glove.read_text())
    out = tmp_path / "run"
    assert _train_seq(data, out, 4, glove).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    mine = embeddings_hash(glove)[:12]
    for vectors, now in ((other, repr(embeddings_hash(other)[:12])), (None, "None")):
        r = _train_seq(data, out, 4, vectors)          # the same run, as if resumed
        assert r.exit_code == 2, r.output
        line, = r.output.strip().splitlines()
        assert f"different settings (embeddings='{mine}' (now {now}))" in line, line
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    r = _train_seq(data, out, 4, copy)                 # the same vectors, another path
    assert r.exit_code == 0, r.output
    plain = tmp_path / "plain"
    assert _train_seq(data, plain, 4).exit_code == 0
    r = _train_seq(data, plain, 4, glove)              # vectors added to a run without
    assert r.exit_code == 2 and f"embeddings=None (now '{mine}')" in r.output, r.output
