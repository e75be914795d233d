"""The Python runner of a small flat numba kernel call, generated for the kernel's arity.

A small fused call (under ``numba_elementwise.UNFLATTENED_MAX`` elements) costs ~2 us, of which a
generic runner's argument tuple, list and loops were ~1 us; this one is straight-line code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def small_flat_runner(
    kernel: Any,
    variant: Callable[[int], Any],
    flat: tuple[bool, ...],
    out_meta: tuple[tuple, Any],
    values: tuple = (),
    link: Any = None,
) -> Callable:
    """``run(xp, a0, ..., *, out=None)`` of a one-part kernel over flat operands, generated for its
    arity: the generic runner's argument tuple, list and loops cost ~1 us of a ~2 us small call.
    ``link``: the kernel's ``kernel_chain.ChainLink``, kept as the runner's ``chain_link``.

    Example:
        >>> run = small_flat_runner(lambda o, a, c: o.__setitem__(slice(None), a * c), None,
        ...                         (True,), ((2,), np.float64), (2.0,))
        >>> run(np, np.array([1.0, 2.0])).tolist()
        [2.0, 4.0]
    """
    (shape, dtype), names = out_meta, [f"a{k}" for k in range(len(flat))]
    # the kernel flattens C-ordered operands itself (``_flat_body``); any other layout, or a
    # numpy scalar, becomes a C array first (an array already C-ordered is returned, ~30 ns)
    flats = ", ".join(f"_c({a})" for a in names)
    call = f"(out, {flats}{''.join(f', _q{k}' for k in range(len(values)))})"
    lines = [f"def run(xp, {', '.join(names)}, *, out=None, **_attrs):"]
    lines += ["    if out is None:", "        out = _empty(_shape, _dtype)"]
    lines += [f"        _kernel{call}", "        return out"]
    for k, name in enumerate(names):  # writing over an input (a donated update): via ``out``
        if flat[k]:
            lines += [
                f"    if {name} is out:",
                f"        _variant({k}){call}",
                "        return out",
            ]
    lines += [f"    _kernel{call}", "    return out"]
    namespace = {"_c": np.ascontiguousarray, "_empty": np.empty, "_kernel": kernel}
    namespace.update(_variant=variant, _shape=shape, _dtype=dtype)
    namespace.update({f"_q{k}": value for k, value in enumerate(values)})
    exec(compile("\n".join(lines) + "\n", "<dualflow small kernel runner>", "exec"), namespace)
    namespace["run"].chain_link = link  # what a plan's chain of small steps needs (kernel_chain)
    return namespace["run"]
