r"""Vashisht & Ramaswamy (2023) on torch: the CNN and text FCAMs and their training.

* :mod:`.models`: the CNN FCAM of Appendix A.2 (focus and classifier networks);
* :mod:`.image_store`: mosaics on the device, normalised per batch;
* :mod:`.train`: one run (a paradigm and a seed) through the shared epoch loop;
* :mod:`.batched`, :mod:`.batched_train`, :mod:`.batched_seeds`,
  :mod:`.stacked_optimizers`: the 12 seeds of a Table 1 cell as one model;
* :mod:`.table1_driver`: the one Table 1 driver (every paradigm and seed of a data set,
  aggregated, results on disk), with an adapter per data set: :mod:`.table1` (CIFAR,
  synthetic and vector mosaics) and :mod:`.hatexplain_table1` (HateXplain posts);
* :mod:`.fixed_focus`: Figure 2-3 curves with CNNs;
* :mod:`.text_models`, :mod:`.text_train`: the HateXplain text FCAM;
* :mod:`.cost`: FLOPs and bytes per mosaic, the card's bound.
"""
