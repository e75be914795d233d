"""Debug mode points at the line that produced a NaN (or an Inf gradient).

Without debug mode a NaN flows silently into the loss. With ``dualflow.set_debug(True)`` (or
``DUALFLOW_DEBUG=1``) every op output and every gradient is checked, and the first NaN/Inf raises
``dualflow.errors.NumericalError`` naming the op and the line of this file that created it.
"""

from __future__ import annotations

import argparse

import numpy as np

import dualflow
from dualflow import ops
from dualflow.errors import NumericalError


def log_likelihood(scale: dualflow.Tensor) -> dualflow.Tensor:
    """A toy objective with a bug: ``scale`` can go negative, and log of a negative is NaN."""
    shifted = scale - 1.5
    return ops.log(shifted).sum()  # the NaN is born here


def norm_of(x: dualflow.Tensor) -> dualflow.Tensor:
    """A norm whose gradient is infinite at 0 (d sqrt(s)/ds = 1 / (2 sqrt(s)))."""
    return ops.sqrt((x * x).sum())  # its gradient is Inf when x == 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="same run (it takes a second)")
    parser.parse_args(argv)
    scale = dualflow.tensor([2.0, 1.0, 3.0], requires_grad=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # numpy's own warnings would repeat it
        print(f"debug off: loss = {log_likelihood(scale).item()} (no hint where the NaN came from)")
        dualflow.set_debug(True)
        try:
            log_likelihood(scale)
        except NumericalError as error:
            print(f"debug on, forward: NumericalError: {error}")
        zero = dualflow.tensor([0.0, 0.0], requires_grad=True)
        try:
            norm_of(zero).backward()
        except NumericalError as error:
            print(f"debug on, backward: NumericalError: {error}")
        finally:
            dualflow.set_debug(False)


if __name__ == "__main__":
    main()
