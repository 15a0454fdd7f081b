"""Option-parsing helpers shared by the ``attn-dyn`` commands (the CLI edge only)."""

from minimal_attn import PARADIGMS
from minimal_attn.errors import InputError, check_paradigm


def parse_paradigms(text, allowed=PARADIGMS, option="--paradigm"):
    """Parse ``"all"`` or a comma list such as ``"sa,lv"`` into canonical names, once each."""
    if str(text).strip().lower() == "all":
        return list(allowed)
    out = [check_paradigm(name, allowed) for name in str(text).split(",") if name.strip()]
    if not out or len(set(out)) != len(out):
        raise InputError(f"{option} {text!r}: give {', '.join(allowed)} (comma-separated, "
                         "once each) or all")
    return out


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
