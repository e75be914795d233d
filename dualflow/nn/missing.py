"""Module's AttributeError for a missing name: says what to use instead of a PyTorch name
dualflow lacks, or suggests a close existing name."""

from __future__ import annotations

import difflib
from typing import Any

# PyTorch Module names dualflow does not have -> what to use instead.
_INSTEAD = {
    "bfloat16": "numpy has no bfloat16: use .half() (float16), .float() or .double()",
    "ipu": "dualflow runs on 'cpu' and 'cuda': use .to('cuda') or .cpu()",
    "xpu": "dualflow runs on 'cpu' and 'cuda': use .to('cuda') or .cpu()",
    "mtia": "dualflow runs on 'cpu' and 'cuda': use .to('cuda') or .cpu()",
    "to_empty": "build the module with device=... or move it with .to(device)",
    "share_memory": "for multi-process training use dualflow.distributed",
    "type": "use .to(dtype), .float(), .double() or .half()",
    "compile": "compile the training step instead: @dualflow.compile def step(...)",
    "register_backward_hook": "use register_full_backward_hook (PyTorch deprecates this one)",
    "register_state_dict_pre_hook": "state-dict hooks are not supported: edit the dict itself",
    "register_load_state_dict_post_hook": "state-dict hooks are not supported: edit the dict",
    "register_load_state_dict_pre_hook": "state-dict hooks are not supported: edit the dict",
    "get_extra_state": "extra state is not saved in state dicts: save it beside the dict",
    "set_extra_state": "extra state is not saved in state dicts: save it beside the dict",
}


class MissingAttribute(AttributeError):
    """AttributeError whose message (with a suggestion) is built only when shown: ``hasattr``
    and ``getattr(m, name, None)`` on modules stay cheap."""

    def __init__(self, module: Any, name: str) -> None:
        super().__init__(name)
        self.module, self.attribute = module, name

    def __str__(self) -> str:
        message = f"{type(self.module).__name__} has no attribute {self.attribute!r}"
        if self.attribute in _INSTEAD:
            return f"{message}: {_INSTEAD[self.attribute]}"
        close = difflib.get_close_matches(self.attribute, dir(self.module), n=1)
        return f"{message}; did you mean {close[0]!r}?" if close else message
