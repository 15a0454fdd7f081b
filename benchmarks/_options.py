"""The benchmark scripts' options, refused as the CLI refuses bad input.

One line ``Error: ...`` naming the option, exit status 2, while the options are parsed:
before anything is loaded, built or timed (benchmarks/README.md). The scripts import it
from beside them, as ``step_profile``. Standard library only: the child run of
``bench_snell_agreement.py --reference-commit`` imports an older package.

    parser = ArgumentParser(description=...)
    parser.add_argument("--batch", type=count(), default=100)        # an integer >= 1
    parser.add_argument("--compile", type=names(("none", "cudagraph")), default="none")
"""

import argparse
import math
import re
import sys


class ArgumentParser(argparse.ArgumentParser):
    """argparse, whose errors read as the CLI's: ``Error: --batch must be an integer >= 1,
    got 0`` and exit status 2, not a usage block and ``error:``."""

    def error(self, message):
        # argparse writes "argument --batch: must be ..."; the CLI "--batch must be ..."
        message = re.sub(r"^argument (\S+): must ", r"\1 must ", message)
        message = re.sub(r"^argument ", "", message)
        sys.stderr.write("Error: " + " ".join(message.split()) + "\n")
        sys.exit(2)


def count(low=1):
    """An option's type: an integer >= ``low`` (a count of seeds, steps, rounds)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text}")
        return value
    return parse


def positive(text):
    """An option's type: a finite number > 0 (a width, a learning rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def names(allowed):
    """An option's type: a comma list of some of ``allowed`` (``--compile none,cudagraph``),
    given back as a list."""
    def parse(text):
        given = text.split(",")
        if not all(given) or set(given) - set(allowed):
            raise argparse.ArgumentTypeError(
                f"must name some of {', '.join(allowed)} (comma-separated), got {text!r}")
        return given
    return parse
