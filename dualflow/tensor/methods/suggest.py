"""The AttributeError of a name a public namespace lacks (``dualflow``, ``nn``, ``F``,
``nn.init``, ``optim``, Tensor methods), naming the closest dualflow equivalent.

In order: the namespace's own hint for a PyTorch name dualflow does not have (what to write
instead), PyTorch's other spelling of a name dualflow has (``RENAMES``: ``x.absolute`` is
``x.abs``), else a close match among the namespace's names (a typo: ``xavier_normal`` ->
``xavier_normal_``). The message is built only when shown, so ``hasattr`` stays cheap.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

# PyTorch's aliases and near-synonyms of names dualflow has -> the dualflow spelling, for
# both the Tensor method and the torch function.
_BOTH = {"absolute": "abs", "negative": "neg", "multiply": "mul", "subtract": "sub"}
_BOTH |= {"divide": "div", "true_divide": "div", "greater": "gt", "less": "lt"}
_BOTH |= {"greater_equal": "ge", "less_equal": "le", "not_equal": "ne", "clamp_min": "clamp"}
_BOTH |= {"clamp_max": "clamp", "fix": "long (it truncates)", "trunc": "long (it truncates)"}
_BOTH |= {"swapaxes": "transpose", "swapdims": "transpose", "moveaxis": "permute"}
_BOTH |= {"movedim": "permute", "tensor_split": "split"}
RENAMES: dict[str, str] = {
    **_BOTH,
    "ndimension": "dim",
    "nelement": "numel",
    "get_device": "device",
    "resize_": "reshape (out of place)",
}
# torch.NAME -> the dualflow name for the same thing.
TORCH_RENAMES: dict[str, str] = {
    **{name: f"dualflow.{to}" for name, to in _BOTH.items() if " " not in to},
    "hstack": "dualflow.cat",
    "vstack": "dualflow.cat",
    "inference_mode": "dualflow.no_grad",
    "device": "dualflow.Device",
    "Generator": "dualflow.random.Generator",
    "seed": "dualflow.random.seed",
    "normal": "dualflow.random.normal (or x.normal_())",
    "jit": "dualflow.compile (it traces a whole training step)",
    "erfinv": "dualflow.nn.init_extra.erfinv",
}
# torch.NAME that dualflow has no name for -> what to write.
TORCH_HINTS: dict[str, str] = {
    "bernoulli": "use dualflow.random.uniform(shape) < p",
    "FloatTensor": "use dualflow.tensor(data, dtype=dualflow.float32)",
    "LongTensor": "use dualflow.tensor(data, dtype=dualflow.long)",
    "BoolTensor": "use dualflow.tensor(data, dtype=dualflow.bool)",
    "set_default_dtype": "pass dtype= to the factories (float32 is the default)",
    "autocast": "no mixed precision: use .half() on the model and inputs",
    "backends": "no backend switches (cudnn.benchmark, TF32, MPS): leave those lines out",
    "fix": "use x.long() (it truncates)",
    "trunc": "use x.long() (it truncates)",
}
# torch.nn layers whose computation dualflow has as a function (or another layer).
NN_RENAMES: dict[str, str] = {
    "ReLU6": "nn.functional.relu6 in forward()",
    "Hardtanh": "nn.functional.hardtanh in forward()",
    "SELU": "nn.functional.selu in forward()",
    "LogSigmoid": "nn.functional.logsigmoid in forward()",
    "CosineSimilarity": "nn.functional.cosine_similarity in forward()",
    "Softmax2d": "nn.Softmax(dim=-3)",
    "UpsamplingNearest1d": "nn.Upsample(mode='nearest')",
    "AdaptiveAvgPool3d": "nn.AdaptiveAvgPool2d on the depth folded into the batch",
}


class MissingName(AttributeError):
    """An AttributeError whose text (with what to use instead) is built when shown.

    Example:
        >>> str(MissingName("module 'dualflow.nn.init'", "nn.init.normal", "normal", {},
        ...                 lambda: ["normal_", "uniform_"]))
        "module 'dualflow.nn.init' has no attribute 'normal'; did you mean 'normal_'?"
    """

    def __init__(
        self,
        subject: str,
        torch_name: str,
        name: str,
        hints: dict[str, str],
        candidates: Callable[[], Iterable[str]] = tuple,
        renames: dict[str, str] | None = None,
    ) -> None:
        super().__init__(name)
        self.subject, self.torch_name, self.attribute = subject, torch_name, name
        self.hints, self.candidates = hints, candidates
        self.renames = RENAMES if renames is None else renames

    def __reduce__(self) -> tuple:
        # crosses processes (a data-loader worker's error) as a plain AttributeError with its text
        return (AttributeError, (str(self),))

    def __str__(self) -> str:
        name = self.attribute
        text = f"{self.subject} has no attribute {name!r}"
        if name in self.hints:
            return f"{text} (PyTorch's {self.torch_name} is not in dualflow); {self.hints[name]}"
        if name in self.renames:
            return f"{text}; use {self.renames[name]} (dualflow's name for {self.torch_name})"
        return text + did_you_mean(name, self.candidates())


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest public candidate, or ``""``.

    Example:
        >>> did_you_mean("kaiming_normal", ["kaiming_normal_", "zeros_"])
        "; did you mean 'kaiming_normal_'?"
    """
    public = [c for c in candidates if not c.startswith("_")]
    same = [c for c in public if c.lower() == name.lower()]  # optim.Adamw -> AdamW
    close = same or difflib.get_close_matches(name, public, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
