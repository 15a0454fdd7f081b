# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The linear orthogonal FCAM: from gradients to Theorems 1 and 2
#
# Vashisht & Ramaswamy (2023), Section 4. This tutorial runs as a plain script
# (`python examples/paper1_linear_ode.py`, about 5 s; `--help` says what it does)
# and opens as a notebook with jupytext.
#
# **Model.** A mosaic $X = (x_1, \dots, x_m)$, a linear focus $f(x) = u^\top x$,
# attention $a = \mathrm{softmax}(Xu)$, a linear classifier $g(x) = Wx$ and the
# softmax $\sigma$. The three losses of Section 2.3 are
#
# $$L^{SA} = -\log\sigma_y\big(W\textstyle\sum_j a_j x_j\big),\quad
#   L^{HA} = \sum_j a_j\,(-\log\sigma_y(Wx_j)),\quad
#   L^{LV} = -\log\sum_j a_j\,\sigma_y(Wx_j).$$
#
# **Data (Assumptions 1-3).** The foreground of class $k$ is the unit vector
# $s_k$, the $s_k$ are orthonormal, and the background segments are zero-mean
# noise orthogonal to every $s_k$.

# %%
import numpy as np
from _settings import read

from minimal_attn import data, dynamics, fcam, gradcheck, ode
from minimal_attn.losses import LOSS_PARADIGMS

read(takes="about 5 s")                   # no settings: --help, and refuses other arguments
m, C = 5, 3
D = data.exact_population(m, C, seed=0)
print("exact population:", D.X.shape, "= 2 signs x C labels x m positions, each (m, d)")

# %% [markdown]
# ## 1. The hand-written gradients are right
#
# `fcam.loss_and_grad` writes out the chain rule of V&R Eqs. (7)-(12). A directional
# finite difference compares $\langle\nabla L, v\rangle$ with
# $(L(p+\epsilon v) - L(p-\epsilon v))/2\epsilon$ for a random direction $v$.

# %%
rng = np.random.default_rng(0)
params = {"W": rng.standard_normal((C, D.X.shape[2])), "u": rng.standard_normal(D.X.shape[2])}
for paradigm in LOSS_PARADIGMS:
    _, grads = fcam.loss_and_grad(params, D.X, D.y, paradigm)
    analytic, numeric = gradcheck.directional_check(
        lambda p, paradigm=paradigm: fcam.loss(p, D.X, D.y, paradigm), grads, params)
    print(f"{paradigm}: analytic {analytic:+.10f}  finite difference {numeric:+.10f}")

# %% [markdown]
# ## 2. Two numbers describe training
#
# From $W = 0$, $u = 0$, gradient flow stays on $w_k = \mu(s_k - \bar s)$,
# $u = \nu\sum_k s_k$. Then the foreground gets attention
# $\alpha = e^\nu/(e^\nu + m - 1)$, and a clean foreground is classified with
# true-class probability $\beta = e^\mu/(e^\mu + C - 1)$. The population losses
# become
#
# $$L^{SA} = -\log\beta(\alpha\mu),\quad
#   L^{HA} = -\alpha\log\beta(\mu) + (1-\alpha)\log C,\quad
#   L^{LV} = -\log\big(\alpha\beta(\mu) + (1-\alpha)/C\big).$$
#
# On this set $\|W\|_F^2 = (C-1)\mu^2$ and $\|u\|^2 = C\nu^2$, so gradient flow
# on $(W, u)$ is $\dot\mu = -\frac{1}{C-1}\partial_\mu L$ and
# $\dot\nu = -\frac1C\partial_\nu L$ (Theorem 2). We check this numerically: at
# a point on the set, the true gradient projected onto the two directions equals
# the ODE right-hand side.

# %%
mu, nu = 1.3, 0.7
on_set = {"W": mu * (D.S - D.S.mean(0)), "u": nu * D.S.sum(0)}
for paradigm in LOSS_PARADIGMS:
    _, g = fcam.loss_and_grad(on_set, D.X, D.y, paradigm)
    mu_dot = -np.sum(g["W"] * (D.S - D.S.mean(0))) / (C - 1)
    nu_dot = -g["u"] @ D.S.mean(0)
    print(paradigm, "gradient:", (round(float(mu_dot), 10), round(float(nu_dot), 10)),
          " ODE:", tuple(round(float(v), 10) for v in ode.rhs(paradigm, mu, nu, m, C)))

# %% [markdown]
# ## 3. ODE against gradient descent (Figure 4)
#
# Full-batch gradient descent with step $\eta$ on the exact population is an
# Euler discretisation of the flow: step $k$ sits at time $t = k\eta$.

# %%
for paradigm in LOSS_PARADIGMS:
    exact = ode.solve(paradigm, m, C, 100.0, t_eval=[25.0, 100.0])
    sim = dynamics.simulate(paradigm, m, C, 100.0, lr=0.02, t_eval=[25.0, 100.0])
    print(f"{paradigm}: mu(100) ODE {exact['mu'][-1]:.5f}  GD {sim['mu'][-1]:.5f}   "
          f"alpha(100) ODE {exact['alpha'][-1]:.4f}  GD {sim['alpha'][-1]:.4f}")

# %% [markdown]
# ## 4. Theorem 1: a frozen focus
#
# With $\alpha$ fixed, $\dot\mu$ depends on $\mu$ alone. Integrating
# $dt = d\mu/\dot\mu$ gives $t(\mu)$ in closed form, e.g. for SA
# $t = (e^{\alpha\mu} - 1)/\alpha^2 + (C-1)\mu/\alpha$.
# `ode.theorem1_mu` inverts it.

# %%
for alpha in (0.1, 0.4, 1.0):
    closed = ode.theorem1_mu("sa", [10.0, 100.0], alpha, C)
    solved = ode.solve("sa", m, C, 100.0, alpha=alpha, t_eval=[10.0, 100.0])["mu"]
    print(f"alpha = {alpha}: closed form {closed.round(6)}  ODE {solved.round(6)}")

# %% [markdown]
# The signature the paper explains: early on, SA's focus rises faster than HA's.
# Later, HA's focus overtakes and SA's splutters. Draw it with
# `attn-dyn ode --out runs/figure4`.

# %%
for t in (20.0, 200.0):
    alphas = {p: float(ode.solve(p, m, C, t, t_eval=[t])["alpha"][-1]) for p in LOSS_PARADIGMS}
    print(f"t = {t:5.0f}: alpha", {p: round(v, 3) for p, v in alphas.items()})

# %% [markdown]
# ## 5. Gradients at nearly one-hot attention
#
# The HA focus gradient of V&R Eq. (10) is $\sum_j a_j(\ell_j - L)\,x_j$ with
# $L = \sum_k a_k\ell_k$. When one segment takes nearly all the attention,
# $\ell_j - L$ subtracts two almost equal numbers and every digit is lost.
# Since $\sum_k a_k = 1$, the same term is $\sum_k a_k(\ell_j - \ell_k)$: pairwise
# differences of exact inputs, no cancellation (`losses.softmax_backward`).
# Two segments, $a_2 = e^{-40}/(1 + e^{-40})$; the exact value is
# $a_1 a_2 (\ell_1 - \ell_2)(x_1 - x_2) \approx +1.359 \times 10^{-14}$.

# %%
X1, y1 = np.array([[[1000.0], [960.0]]]), np.array([1])
p1 = {"W": np.array([[1.0], [-1.0]]), "u": np.array([1.0])}
a = np.exp(X1[0, :, 0] - np.logaddexp(*X1[0, :, 0]))               # attention (a1, a2)
ell = np.logaddexp(0.0, 2 * X1[0, :, 0])                             # -log sigma_1(W x_j)
naive = np.sum(a * (ell - np.sum(a * ell)) * X1[0, :, 0])           # the centred form
exact = a[0] * a[1] * (ell[0] - ell[1]) * (X1[0, 0, 0] - X1[0, 1, 0])
print(f"centred form {naive:+.4e}   pairwise (ours) "
      f"{fcam.loss_and_grad(p1, X1, y1, 'ha')[1]['u'][0]:+.4e}   exact {exact:+.4e}")
