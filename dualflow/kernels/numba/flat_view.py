"""A C-ordered array's elements as a 1-D view inside a numba kernel, in a few LLVM instructions.

Generated flat kernels take operands of any shape and index them flat. numba's ``reshape`` (and
``ravel``) is a generic implementation that LLVM optimizes into every kernel: it made a small
fused kernel's compile ~0.3 s instead of ~0.2 s here, once per kernel and operand rank.
``flat_view`` builds the 1-D array struct directly (same data, meminfo and parent).
"""

from __future__ import annotations

import hashlib
from typing import Any

from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from dualflow.kernels.base.numba_cache import code_fingerprint


def _flat_view_typer(typingctx: Any, array: Any) -> Any:
    # only C-ordered arrays have their elements in flat order: any other layout is not typed
    # (numba raises), never read in the wrong order
    if not isinstance(array, types.Array) or array.layout != "C":
        return None
    flat = array.copy(ndim=1, layout="C")

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        source = make_array(signature.args[0])(context, builder, value=args[0])
        view = make_array(signature.return_type)(context, builder)
        populate_array(
            view,
            data=source.data,
            shape=cgutils.pack_array(builder, [source.nitems]),
            strides=cgutils.pack_array(builder, [source.itemsize]),
            itemsize=source.itemsize,
            meminfo=source.meminfo,
            parent=source.parent,
        )
        return impl_ret_borrowed(context, builder, signature.return_type, view._getvalue())

    return flat(array), codegen


flat_view = intrinsic(_flat_view_typer)
flat_view.__doc__ = """``a.reshape(a.size)`` of a C-ordered array ``a`` in numba code (any rank).

    Example:
        >>> import numba, numpy as np
        >>> numba.njit(lambda a: flat_view(a)[4])(np.arange(6).reshape(2, 3))
        4
    """
__test__ = {"flat_view": flat_view.__doc__}  # doctest does not look into intrinsic objects

FINGERPRINT = hashlib.sha256(code_fingerprint(_flat_view_typer.__code__)).hexdigest()[:16]
IMPORT = f"from dualflow.kernels.numba.flat_view import flat_view  # {FINGERPRINT}"
"""The line a generated flat kernel imports ``flat_view`` with: a changed view is a new kernel
source, never stale cached machine code."""
