"""The names of PyTorch's ``torch.*`` tensor functions dualflow defines, by defining module.

Names only, no imports: ``dualflow/__init__`` lists them as lazy attributes without loading the
tensor machinery, and ``functions.py`` / ``index_functions.py`` define exactly these, so the two
lists cannot drift apart.

Example:
    >>> "sum" in METHOD_FORMS and "cat" in OTHERS, "unique" in INDEX_METHOD_FORMS
    (True, True)
"""

from __future__ import annotations

# torch.NAME(input, *args, **kwargs) is input.NAME(*args, **kwargs) (``functions.py``).
METHOD_FORMS = (
    "sum", "mean", "prod", "std", "var", "max", "min", "amax", "amin", "argmax", "argmin",
    "all", "any", "norm", "logsumexp", "count_nonzero", "exp", "expm1", "log", "log1p", "sqrt",
    "rsqrt", "abs", "neg", "sin", "cos", "tanh", "sigmoid", "relu", "erf", "sign", "square",
    "reciprocal", "pow", "clamp", "clip", "softmax", "log_softmax", "matmul", "mm", "bmm", "mv",
    "dot", "gather", "scatter", "scatter_add", "index_select", "masked_fill", "masked_select",
    "topk", "sort", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum",
    "allclose", "equal", "isnan", "isinf", "isfinite", "flatten", "reshape", "squeeze",
    "unsqueeze", "transpose", "permute", "t", "chunk", "split", "unbind", "narrow", "flip",
    "add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "logical_not", "logical_and",
    "logical_or", "logical_xor", "clone", "numel", "triu", "tril", "cumsum", "cumprod", "cummax",
    "cummin", "logcumsumexp", "remainder", "fmod", "floor_divide", "roll", "tensor_split",
)  # fmt: skip
# written out in ``functions.py``
OTHERS = ("cat", "concat", "concatenate", "stack", "where", "from_numpy", "is_tensor", "einsum")
FUNCTIONS = METHOD_FORMS + OTHERS
# torch.index_add, scatter_reduce, unique: method forms; repeat_interleave written out
# (``index_functions.py``)
INDEX_METHOD_FORMS = ("index_add", "scatter_reduce", "unique")
INDEX_FUNCTIONS = INDEX_METHOD_FORMS + ("repeat_interleave",)
