"""Focus-prediction counts, SAIF (Section 2.4, Table 1) and the Figure 1 heat map."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import examples

from minimal_attn.errors import InputError
from minimal_attn.experiments.plots import plot_heatmap
from minimal_attn.saif import (
    focus_prediction_counts,
    foreground_scores,
    heatmap,
    saif,
    summarise,
)

# (a_z, s_y) pairs chosen on and around the thresholds; the expected cell is the comment
A_Z = np.array([0.9, 0.81, 0.8, 0.8, 1.0, 0.0, 0.5, 0.95])
S_Y = np.array([0.9, 0.5, 0.9, 0.8, 1.0, 1.0, 0.2, 0.80001])
#    ftpt,  ftpf, ffpt, ffpf, ftpt, ffpt, ffpf, ftpt


def test_counts_with_strict_thresholds():
    c = focus_prediction_counts(A_Z, S_Y)
    assert (c["ftpt"], c["ftpf"], c["ffpt"], c["ffpf"]) == (3, 1, 2, 2)
    assert c["saif"] == pytest.approx(3 / 8)
    assert saif(A_Z, S_Y) == pytest.approx(3 / 8)
    # a lower threshold moves the exact-0.8 values into "true"
    c = focus_prediction_counts(A_Z, S_Y, threshold=0.79)
    assert (c["ftpt"], c["ftpf"], c["ffpt"], c["ffpf"]) == (5, 1, 1, 1)


def test_heatmap_bins_and_orientation():
    grid = heatmap(A_Z, S_Y)
    assert grid.shape == (5, 5)
    assert grid.sum() == pytest.approx(100.0)
    expect = np.zeros((5, 5))
    # rows are a_z bins, columns s_y bins; 0.8 opens the last bin, 1.0 falls in it
    for i, j in [(4, 4), (4, 2), (4, 4), (4, 4), (4, 4), (0, 4), (2, 1), (4, 4)]:
        expect[i, j] += 100 / 8
    np.testing.assert_allclose(grid, expect)
    # orientation: high focus with a wrong prediction is row 4, column 0 (not the transpose)
    g = heatmap([1.0], [0.0])
    assert g[4, 0] == 100.0 and g[0, 4] == 0.0


#: Any value in [0, 1], or one on, just inside (5e-7) or just outside (2e-6) the heat map's
#: edge tolerance of 1e-6 around a bin edge (0.8 is also the focus/prediction threshold).
UNIT = st.one_of(
    st.floats(0.0, 1.0),
    st.builds(lambda e, d: min(max(e + d, 0.0), 1.0),
              st.sampled_from([0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
              st.sampled_from([0.0, 5e-7, -5e-7, 2e-6, -2e-6, 1e-12, -1e-12])))


def _row_of(v):
    """The heat-map bin of each value, as documented: the number of inner edges 0.2 ... 0.8
    that v reaches, a value within 1e-6 below an edge counting as the edge."""
    return sum((v >= e - 1e-6).astype(int) for e in (0.2, 0.4, 0.6, 0.8))


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_heatmap_and_counts_properties(data):
    n = data.draw(st.integers(1, 50))
    a_z = data.draw(hnp.arrays(np.float64, n, elements=UNIT))
    s_y = data.draw(hnp.arrays(np.float64, n, elements=UNIT))
    grid = heatmap(a_z, s_y)
    assert grid.sum() == pytest.approx(100.0) and np.all(grid >= 0)
    # every cell is the percentage of its (a_z bin, s_y bin) pairs, edges snapped as
    # documented (np.histogram knows no snapping: 0.2 - 5e-7 would land a row lower)
    want = np.zeros((5, 5))
    np.add.at(want, (_row_of(a_z), _row_of(s_y)), 100.0 / n)
    np.testing.assert_allclose(grid, want, rtol=1e-12, atol=1e-12)
    # the counts are the strict comparisons with the threshold (exactly 0.8 is false)
    c = focus_prediction_counts(a_z, s_y)
    focus, pred = a_z > 0.8, s_y > 0.8
    assert (c["ftpt"], c["ftpf"], c["ffpt"], c["ffpf"]) == (
        np.sum(focus & pred), np.sum(focus & ~pred), np.sum(~focus & pred),
        np.sum(~focus & ~pred))
    assert c["saif"] == c["ftpt"] / n
    # SAIF only counts cells strictly above 0.8: it never exceeds the top-right cell
    assert 100 * c["saif"] <= grid[4, 4] + 1e-9


def test_empty_and_invalid_inputs():
    assert math.isnan(saif([], []))
    np.testing.assert_array_equal(heatmap([], []), np.zeros((5, 5)))
    with pytest.raises(InputError, match=r"a_z must hold finite values in \[0, 1\]"):
        saif([1.5], [0.5])
    with pytest.raises(InputError, match="s_y"):
        heatmap([0.5], [np.nan])
    with pytest.raises(InputError, match="one value per instance"):
        saif([0.5, 0.5], [0.5])
    # float32 softmax may overshoot 1 by an ulp: accepted, and lands in the last bin
    assert heatmap([np.float32(1.0000001)], [0.5])[4, 2] == 100.0


def test_foreground_scores_and_summary():
    a = np.array([[0.9, 0.05, 0.05],     # focus on z = 0
                  [0.1, 0.1, 0.8],       # 0.8 on z = 2: focus false (strict)
                  [0.3, 0.3, 0.4],
                  [0.0, 1.0, 0.0]])
    s = np.array([[0.1, 0.85],           # y = 1
                  [0.95, 0.05],          # y = 0
                  [0.6, 0.4],            # y = 1: wrong
                  [0.1, 0.9]])           # y = 1
    y, z = np.array([1, 0, 1, 1]), np.array([0, 2, 1, 1])
    a_z, s_y = foreground_scores(a, s, y, z)
    np.testing.assert_allclose(a_z, [0.9, 0.8, 0.3, 1.0])
    np.testing.assert_allclose(s_y, [0.85, 0.95, 0.4, 0.9])
    out = summarise(a, s, y, z)
    assert out["n"] == 4 and out["accuracy"] == 0.75
    assert out["saif"] == out["ftpt"] == 0.5
    assert (out["ftpf"], out["ffpt"], out["ffpf"]) == (0.0, 0.25, 0.25)
    assert isinstance(out["heatmap"], list) and len(out["heatmap"]) == 5
    assert sum(map(sum, out["heatmap"])) == pytest.approx(100.0)
    assert out["heatmap"][4][4] == 75.0 and out["heatmap"][1][2] == 25.0


def test_accuracy_is_the_argmax_with_three_classes():
    """With C = 3 the true class can win with s_y < 1/2 (row 1) and lose with s_y > 1/3
    (row 2): accuracy counts argmax(s) == y, not a bar on s_y."""
    a = np.array([[0.9, 0.05, 0.05], [0.9, 0.05, 0.05]])
    s = np.array([[0.3, 0.4, 0.3], [0.6, 0.35, 0.05]])
    out = summarise(a, s, np.array([1, 1]), np.array([0, 0]))
    assert out["accuracy"] == 0.5


def test_foreground_scores_validation():
    a, s = np.full((2, 3), 1 / 3), np.full((2, 2), 0.5)
    with pytest.raises(InputError, match="z must hold integers in 0..2"):
        foreground_scores(a, s, [0, 1], [0, 3])
    with pytest.raises(InputError, match="y must hold integers in 0..1"):
        foreground_scores(a, s, [0, 2], [0, 1])
    with pytest.raises(InputError, match="same number of instances"):
        foreground_scores(a, s, [0], [0, 1])


def test_plot_heatmap_writes_file(tmp_path):
    grid = heatmap(A_Z, S_Y)
    path = tmp_path / "heat.png"
    assert plot_heatmap(grid, "SA, m = 9", str(path)) == str(path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 1000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    plot_heatmap(np.zeros((5, 5)), "empty", str(tmp_path / "zero.pdf"))
    assert (tmp_path / "zero.pdf").read_bytes().startswith(b"%PDF")


def test_plot_heatmap_draws_figure_1s_layout(tmp_path, monkeypatch):
    # V&R Sec. 2.4: the top left holds instances classified correctly despite a low focus
    # (s_y high, a_z low), and a confident classifier leaves the middle rows empty
    from minimal_attn.experiments.plots import vr

    drawn = {}
    monkeypatch.setattr(vr, "save_figure", lambda fig, path, **kw: drawn.setdefault("fig", fig))
    grid = heatmap([0.1, 0.1, 0.5], [0.95, 0.9, 0.1])    # two correct with a low focus
    plot_heatmap(grid, "t", str(tmp_path / "h.png"))
    ax = drawn["fig"].axes[0]
    shown = np.asarray(ax.images[0].get_array())
    assert ax.images[0].origin == "lower"                 # row 4 (s_y >= 0.8) on top
    assert shown[4, 0] == pytest.approx(200 / 3) and shown[0, 2] == pytest.approx(100 / 3)
    assert "a_z" in ax.get_xlabel() and "s_y" in ax.get_ylabel()
    cells = {(t.get_position(), t.get_text()) for t in ax.texts}
    assert ((0, 4), "66.7") in cells                     # x = a_z bin 0, y = s_y bin 4


def test_plot_heatmap_validation(tmp_path):
    with pytest.raises(InputError, match="square grid"):
        plot_heatmap(np.zeros((5, 4)), "t", str(tmp_path / "x.png"))
    with pytest.raises(InputError, match="does not exist"):
        plot_heatmap(np.zeros((5, 5)), "t", str(tmp_path / "missing" / "x.png"))
    assert not (tmp_path / "x.png").exists()


def test_heatmap_puts_a_uniform_focus_in_one_row():
    # a_z = 1/m exactly, and as float32 softmax rounds it either way (0.19999999 / 0.20000001)
    m = 5
    f32 = np.full((3, m), 0.0, np.float32)
    a32 = np.exp(f32) / np.exp(f32).sum(1, keepdims=True, dtype=np.float32)
    a_z = np.concatenate([[1 / m, 0.2 - 3e-8, 0.2 + 3e-8], a32[:, 0].astype(float)])
    grid = np.asarray(heatmap(a_z, np.full(a_z.size, 0.5)))
    assert grid[1, 2] == pytest.approx(100.0)        # all in row [0.2, 0.4), column 0.4-0.6
    # values clearly away from an edge keep their bins
    grid = np.asarray(heatmap([0.1999, 0.2001, 0.79, 0.81], [0.0, 0.0, 0.99, 1.0]))
    assert grid[0, 0] == grid[1, 0] == grid[3, 4] == grid[4, 4] == 25.0
