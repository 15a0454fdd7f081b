r"""One table of notation: paper symbol -> name in code -> where it is defined.

Both papers number their equations from (1), so every equation reference
carries its paper: ``V&R Eq. (n)`` for Vashisht & Ramaswamy (2023) and
``Snell Eq. (n)`` for Snell, Zhong, Klein & Steinhardt (2021). ``grep -rn
"V&R Eq. (8)" minimal_attn`` lands on the line that implements it;
``lookup("V&R Eq. (8)")`` finds the row here.
"""

from typing import NamedTuple


class Symbol(NamedTuple):
    paper: str      # "V&R" or "Snell"
    symbol: str     # as printed (LaTeX without backslashes where readable)
    code: str       # name in code
    where: str      # module (and function) that defines or implements it
    equation: str   # equation tag, or the section when the symbol has no number


TABLE = (
    # ------------------------------------------------ Vashisht & Ramaswamy (2023)
    Symbol("V&R", "X = (x_1..x_m)", "X (N, m, d)", "data.Mosaics", "Sec. 2.2"),
    Symbol("V&R", "y, j* (foreground position)", "y, z", "data.Mosaics", "Sec. 2.1-2.2"),
    Symbol("V&R", "m, C, d", "m, n_classes (C), d", "data", "Sec. 2.2"),
    Symbol("V&R", "f(x_j) (focus score)", "scores (N, m)", "losses", "Sec. 2.3"),
    Symbol("V&R", "sigma_j(Xu) (attention)", "a = attention(scores)", "losses.attention",
           "Sec. 2.3"),
    Symbol("V&R", "x~ = sum_j a_j x_j", "x_tilde", "fcam.forward",
           "App. A.6, before V&R Eq. (7)"),
    Symbol("V&R", "g (classifier), W = [w_1..w_C]^T", "W (C, d)", "fcam", "Sec. 4"),
    Symbol("V&R", "u (linear focus)", "u (d,)", "fcam", "Sec. 4"),
    Symbol("V&R", "sigma_k (softmax)", "softmax / log_softmax", "losses", "Sec. 2.3"),
    Symbol("V&R", "L^SA, L^HA, L^LV", "value_and_grad_sa/_ha/_lv, loss_*", "losses",
           "Sec. 2.3"),
    Symbol("V&R", "-grad_W L, -grad_u L (SA)", "dW, du", "fcam.loss_and_grad",
           "V&R Eq. (7), V&R Eq. (8)"),
    Symbol("V&R", "-grad_W L, -grad_u L (HA)", "dW, du", "fcam.loss_and_grad; losses",
           "V&R Eq. (9), V&R Eq. (10)"),
    Symbol("V&R", "gamma_j (LV posterior)", "gamma", "losses.lv_from_log_lik",
           "V&R Eq. (11), V&R Eq. (12)"),
    Symbol("V&R", "s^SA, s^HA, s^LV (inference)", "infer_sa/_ha/_lv", "losses", "Sec. 2.3"),
    Symbol("V&R", "a_z, s_y, tau, SAIF", "focus, prediction, 0.8, saif", "saif",
           "Sec. 2.4, Table 1"),
    Symbol("V&R", "alpha (fixed foreground focus)", "alpha", "fixed_focus; data",
           "Sec. 3.1"),
    Symbol("V&R", "L^FF", "fixed_focus_loss", "fixed_focus", "Sec. 3.1"),
    Symbol("V&R", "delta_{alpha,t} (incentive)", "incentive", "fixed_focus",
           "Sec. 3.2-3.3"),
    Symbol("V&R", "mu(t), nu(t)", "mu, nu", "ode; dynamics.read_mu_nu",
           "Theorems 1-2"),
    Symbol("V&R", "dmu/dt", "mu_dot", "ode.mu_dot",
           "V&R Eq. (1), V&R Eq. (2), V&R Eq. (3)"),
    Symbol("V&R", "dnu/dt", "nu_dot", "ode.nu_dot",
           "V&R Eq. (4), V&R Eq. (5), V&R Eq. (6)"),
    Symbol("V&R", "beta(t) = e^mu / (e^mu + C - 1)", "beta_of", "ode", "Theorem 1"),
    Symbol("V&R", "alpha(t) = e^nu / (e^nu + m - 1)", "alpha_of", "ode", "Theorem 2"),
    Symbol("V&R", "Z(t) = alpha beta + (1 - alpha)/C", "Z", "ode", "Theorems 1-2"),
    Symbol("V&R", "s_k (foreground vectors)", "S (C, d)", "data.Mosaics", "Assumptions 1-3"),
    # ------------------------------------------------ Snell, Zhong, Klein & Steinhardt (2021)
    Symbol("Snell", "x_l, y_t, L, T", "x, y (id arrays)", "datasets.text; ibm1; proxy", "Sec. 2"),
    Symbol("Snell", "alpha_{t,l} (attention)", "u / v rows (T, L)", "agreement", "Snell Eq. (1)"),
    Symbol("Snell", "beta_{t,l} (probe)", "beta rows (T, L)", "agreement", "Snell Eq. (4)"),
    Symbol("Snell", "p_t = sigma(1/L sum_l W e_{x_l})", "logp", "proxy.loss_and_grads",
           "Snell Eq. (5)"),
    Symbol("Snell", "beta^px_{t,l}", "beta_px", "proxy.beta_px", "Snell Eq. (6)"),
    Symbol("Snell", "A(u, v), 5% L", "agreement, top_k", "agreement", "Snell Eq. (10)"),
    Symbol("Snell", "xi(u, v)", "xi", "agreement.xi", "Snell Eq. (11)"),
    Symbol("Snell", "theta^px_{i,o} = sigma(W e_i)_o", "word_translation", "proxy",
           "Snell Eq. (13)"),
    Symbol("Snell", "L (summed NLL)", "loss", "proxy.loss_and_grads", "Snell Eq. (14)"),
    Symbol("Snell", "r = T p - counts (residual)", "residual", "proxy.loss_and_grads",
           "Snell Eq. (14)"),
    Symbol("Snell", "d(W e_i) / d tau at tau = 0 (logits; Eq. (15) prints theta)",
           "logit_velocity, init_logit_velocity", "proxy_velocity", "Snell Eqs. (15), (53)"),
    Symbol("Snell", "C_{i,o} (count table)", "count_table", "ibm1", "Snell Eq. (16)"),
    Symbol("Snell", "Trans(o|i)", "trans_from_counts; IBM1Model", "ibm1", "Snell Eq. (17)"),
    Symbol("Snell", "beta^IBM_{t,l}", "beta_ibm", "ibm1", "Snell Eq. (18)"),
    Symbol("Snell", "alpha^IBM(t, l)", "alpha_ibm", "ibm1", "Snell Eq. (19)"),
)


def lookup(text):
    """Rows whose symbol, code name or equation contains ``text`` (case-insensitive)."""
    text = text.lower()
    return [s for s in TABLE
            if text in s.symbol.lower() or text in s.code.lower() or text in s.equation.lower()]


def as_markdown():
    """The table as Markdown (for docs/core.md)."""
    lines = ["| paper | symbol | code | where | equation |", "|---|---|---|---|---|"]
    lines += [f"| {s.paper} | {s.symbol} | `{s.code}` | `{s.where}` | {s.equation} |"
              for s in TABLE]
    return "\n".join(lines)
