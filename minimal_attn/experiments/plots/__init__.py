r"""Every figure of attn-dyn, drawn with matplotlib (Agg, no display), written atomically.

One place to import them from; the code sits in :mod:`.vr`, :mod:`.snell` and
:mod:`.sweeps` by paper.

V&R (Vashisht & Ramaswamy 2023):

* :func:`plot_fixed_focus_losses`, :func:`plot_incentives`: Figures 2 and 3, from
  :func:`minimal_attn.fixed_focus.fixed_focus_curves`;
* :func:`plot_trajectories`: Figure 4, mu(t) and nu(t) of the ODEs (Theorems 1-2);
* :func:`plot_heatmap`: Figure 1's focus-prediction heat map of (a_z, s_y);
* :func:`plot_training_curves`: mean training a_z and loss, test accuracy and SAIF per
  epoch of Table 1 runs.

Snell et al. (2021):

* :func:`plot_agreement_curves`: agreement and performance against steps (Fig. 2);
* :func:`plot_synthetic_curves`, :func:`plot_gammas`, :func:`plot_count_table`:
  Figs. 3-8 and Sec. 6.2 of the synthetic tasks.

Sweeps: :func:`plot_sweep_cells` (Table 1 cells), :func:`plot_table2_rows` (Table 2 rows).
"""

from minimal_attn.experiments.plots.snell import (  # noqa: F401
    plot_agreement_curves,
    plot_count_table,
    plot_gammas,
    plot_synthetic_curves,
)
from minimal_attn.experiments.plots.sweeps import plot_sweep_cells, plot_table2_rows  # noqa: F401
from minimal_attn.experiments.plots.vr import (  # noqa: F401
    plot_fixed_focus_losses,
    plot_heatmap,
    plot_incentives,
    plot_training_curves,
    plot_trajectories,
)
