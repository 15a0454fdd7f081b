"""attn-dyn: how attention learns.

The NumPy core (this package) reimplements two papers on attention training
dynamics; :mod:`minimal_attn.notation` maps every symbol to its name in code.

* Vashisht & Ramaswamy (2023), "On the Learning Dynamics of Attention
  Networks" (ECAI): :mod:`losses`, :mod:`fcam`, :mod:`data`, :mod:`ode`,
  :mod:`dynamics`, :mod:`fixed_focus`, :mod:`saif`.
* Snell, Zhong, Klein & Steinhardt (2021), "Approximating How Single Head
  Attention Learns": :mod:`proxy`, :mod:`proxy_velocity`, :mod:`logistic_proxy`, :mod:`ibm1`,
  :mod:`agreement`, :mod:`synthetic_tasks`; the parallel-text readers are in
  :mod:`minimal_attn.datasets.text`.

The names in ``__all__`` are the curated API, importable from the package
itself (loaded on first use, so ``import minimal_attn`` stays cheap). The core
never imports torch; the torch backend lives in ``minimal_attn.backends`` and
the command line in ``minimal_attn.cli``.
"""

import importlib as _importlib
import os as _os

from minimal_attn import _checkout

_checkout.install(__name__, _os.path.dirname(_os.path.abspath(__file__)))

__version__ = "0.1.0"

#: The canonical paradigm names, used everywhere (CLI words, dict keys, files).
PARADIGMS = ("sa", "ha", "lv", "hybrid")

_API = {
    # losses (V&R Sec. 2.3)
    "LOSS_PARADIGMS": "losses", "attention": "losses", "value_and_grad": "losses",
    "value_and_grad_sa": "losses", "value_and_grad_ha": "losses",
    "value_and_grad_lv": "losses", "loss": "losses", "infer": "losses", "phase": "losses",
    # linear FCAM (V&R Sec. 4, Eqs. (7)-(12))
    "fcam_forward": ("fcam", "forward"), "fcam_loss_and_grad": ("fcam", "loss_and_grad"),
    "fcam_train": ("fcam", "train"), "fcam_predict": ("fcam", "predict"),
    # data and ODEs (V&R Sec. 4, Theorems 1-2)
    "exact_population": "data", "linear_orthogonal": "data", "gaussian_mosaics": "data",
    "solve_ode": ("ode", "solve"), "theorem1_mu": "ode", "simulate": "dynamics",
    # fixed focus (V&R Sec. 3)
    "fixed_focus_curves": "fixed_focus", "closed_form_curves": "fixed_focus",
    "LinearFixedFocusModel": "fixed_focus", "ReferenceFixedFocusModel": "fixed_focus",
    # SAIF (V&R Sec. 2.4)
    "focus_prediction_counts": "saif", "saif_summary": ("saif", "summarise"),
    # Snell et al.: proxy, IBM-1, agreement
    "ProxyConfig": "proxy", "train_proxy": "proxy", "beta_px": "proxy",
    "train_ibm1": "ibm1", "count_table": "ibm1", "beta_ibm": "ibm1", "alpha_ibm": "ibm1",
    "agreement_rows": "agreement", "average_agreement": "agreement", "xi": "agreement",
}

__all__ = ["PARADIGMS", "__version__", *_API]


def __getattr__(name):
    if name not in _API:
        raise AttributeError(f"module 'minimal_attn' has no attribute {name!r}")
    module, attr = _API[name] if isinstance(_API[name], tuple) else (_API[name], name)
    return getattr(_importlib.import_module(f"{__name__}.{module}"), attr)


def __dir__():
    return sorted(set(globals()) | set(__all__))
