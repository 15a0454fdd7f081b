r"""Digits of the ODEs (:mod:`minimal_attn.ode`): the terms of V&R Eqs. (1)-(6) that cancel.

:math:`\beta(\mu) = e^\mu/(e^\mu + C - 1)` and the terms built on it, written so that
nothing overflows at :math:`|\mu|` in the hundreds and nothing cancels where a term
vanishes (HA's :math:`\log(C\beta)` and LV's :math:`\beta - 1/C` at :math:`\mu = 0`, where
the flow starts). Host-side NumPy, like :mod:`minimal_attn.ode`; ``tests/test_ode.py``
holds them to an 80-digit reference.
"""

import numpy as np
from scipy.special import expit


def _log_beta(mu, n_classes):
    r""":math:`\log\beta(\mu) = -\log(1 + (C-1)e^{-\mu})`, finite where :math:`\beta` underflows."""
    return -np.logaddexp(0.0, np.log(n_classes - 1) - np.asarray(mu, dtype=float))


def _one_minus_beta(mu, n_classes):
    r""":math:`1 - \beta(\mu) = (C-1)/(e^\mu + C - 1)`, computed directly (no cancellation)."""
    return expit(np.log(n_classes - 1) - np.asarray(mu, dtype=float))


def _log_c_beta(mu, n_classes):
    r""":math:`\log(C\beta(\mu))` (HA's :math:`\dot\nu`), to its last digits near mu = 0.

    :math:`-\log(1 + \tfrac{C-1}{C}(e^{-\mu} - 1))` for mu >= 0 and
    :math:`\mu - \log(1 + (e^{\mu} - 1)/C)` below: ``log1p`` of ``expm1``, where
    :math:`\log C + \log\beta` cancels (relative error eps/|mu|) and nothing overflows.
    """
    mu, C = np.asarray(mu, dtype=float), n_classes
    up = -np.log1p((C - 1) / C * np.expm1(-np.maximum(mu, 0.0)))
    down = np.minimum(mu, 0.0) - np.log1p(np.expm1(np.minimum(mu, 0.0)) / C)
    return np.where(mu >= 0, up, down)


def _beta_minus_inv_c(mu, n_classes):
    r""":math:`\beta(\mu) - 1/C = \tfrac{C-1}{C}\,\tfrac{e^\mu - 1}{e^\mu + C - 1}` (LV's
    :math:`\dot\nu`), written ``-expm1(-mu) (C-1) beta / C`` for mu >= 0 and
    ``expm1(mu) (1 - beta) / C`` below: no cancellation near mu = 0, no overflow."""
    mu, C = np.asarray(mu, dtype=float), n_classes
    up = -np.expm1(-np.maximum(mu, 0.0)) * (C - 1) * expit(mu - np.log(C - 1)) / C   # beta
    down = np.expm1(np.minimum(mu, 0.0)) * _one_minus_beta(mu, C) / C
    return np.where(mu >= 0, up, down)
