"""Refuse runs that cannot fit before they allocate: memory and step-count estimates.

A run that would need more memory than the machine has, or more steps than it
could finish, is refused up front with :class:`~minimal_attn.errors.InputError`
naming the estimate, what is available, and the parameter to lower.
"""

import os

from minimal_attn.errors import InputError

#: Refuse a single run above this many optimisation steps (about a day on a fast CPU).
MAX_STEPS = 10**9


def available_memory():
    """Bytes of memory available to a new allocation (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62          # unknown: do not refuse


def _names(param):
    """``"m"`` or ``("m", "n_classes")`` -> ``"m or n_classes"`` (the CLI rewrites each)."""
    return param if isinstance(param, str) else " or ".join(param)


def _gib(n_bytes):
    return f"{n_bytes / 2**30:.3g} GiB"


def check_memory(n_bytes, what, param, available=None):
    """Raise InputError if ``n_bytes`` (an estimate for ``what``) exceeds available memory.

    ``param`` names the parameter to lower; the CLI rewrites it into its option.
    """
    available = available_memory() if available is None else available
    if n_bytes > 0.8 * available:
        raise InputError(f"{what} needs about {_gib(n_bytes)} of memory but only "
                         f"{_gib(available)} is available; lower {_names(param)}", param=param)
    return n_bytes


def check_steps(n_steps, what, param):
    """Raise InputError if a run would take more than MAX_STEPS steps."""
    if n_steps > MAX_STEPS:
        raise InputError(f"{what} would take {n_steps:.3g} steps (limit {MAX_STEPS:.0e}); "
                         f"lower {_names(param)}", param=param)
    return n_steps
