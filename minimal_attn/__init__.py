"""attn-dyn: how attention learns.

The NumPy core (this package) reimplements two papers on attention training
dynamics; see README.md for a map from paper sections to modules.

* Vashisht & Ramaswamy (2023), "On the Learning Dynamics of Attention
  Networks" (ECAI): :mod:`losses`, :mod:`fcam`, :mod:`data`, :mod:`ode`,
  :mod:`dynamics`, :mod:`fixed_focus`.
* Snell, Zhong, Klein & Steinhardt (2021), "Approximating How Single Head
  Attention Learns": :mod:`proxy`, :mod:`ibm1`, :mod:`agreement`,
  :mod:`text_data`.

The core never imports torch; the torch backend lives in
``minimal_attn.backends`` and the command line in ``minimal_attn.cli``.
"""

__version__ = "0.1.0"

#: The canonical paradigm names, used everywhere (CLI words, dict keys, files).
PARADIGMS = ("sa", "ha", "lv", "hybrid")
