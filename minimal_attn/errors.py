"""Input validation shared by the library and the CLI.

Every check raises :class:`InputError` with a one-line message that names the
problem and the fix; the CLI turns it into ``Error: ...`` on stderr and exit
status 2, without a traceback.
"""

import math

from . import PARADIGMS

#: Aliases accepted at the CLI edge only; the library speaks the canonical names.
PARADIGM_ALIASES = {"soft": "sa", "hard": "ha", "lvml": "lv"}


class InputError(ValueError):
    """Bad user input (a value, a file, a folder). The message is one line."""


def check_paradigm(name, allowed=PARADIGMS):
    """Return the canonical paradigm name for ``name`` or raise InputError."""
    key = str(name).strip().lower()
    key = PARADIGM_ALIASES.get(key, key)
    if key not in allowed:
        raise InputError(
            f"unknown paradigm {name!r}: use one of {', '.join(allowed)}")
    return key


def parse_paradigms(text, allowed=PARADIGMS, option="--paradigm"):
    """Parse ``"all"`` or a comma list such as ``"sa,lv"`` into canonical names, once each."""
    if str(text).strip().lower() == "all":
        return list(allowed)
    out = [check_paradigm(name, allowed) for name in str(text).split(",") if name.strip()]
    if not out or len(set(out)) != len(out):
        raise InputError(f"{option} {text!r}: give {', '.join(allowed)} (comma-separated, "
                         "once each) or all")
    return out


def check_int_at_least(name, value, low):
    """Require an integer ``value >= low`` (e.g. m >= 2 segments, C >= 2 classes)."""
    if int(value) != value or value < low:
        raise InputError(f"{name} must be an integer >= {low}, got {value}")
    return int(value)


def check_alpha(alpha, name="alpha"):
    """Require a foreground focus score in [0, 1]."""
    if not (isinstance(alpha, (int, float)) and 0.0 <= alpha <= 1.0):
        raise InputError(f"{name} must lie in [0, 1], got {alpha}")
    return float(alpha)


def check_positive(name, value):
    """Require a finite number > 0 (a time horizon, a learning rate)."""
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be a finite number > 0, got {value}")
    return value


def parse_float_list(text, name):
    """Parse ``"0.1,0.2"`` into floats; raise InputError on anything else."""
    try:
        values = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise InputError(
            f"{name} must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise InputError(f"{name} is empty: give at least one number, e.g. 0.1,0.5")
    return values
