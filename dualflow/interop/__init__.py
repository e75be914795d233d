"""Weights in and out of other tools' files: safetensors, and PyTorch checkpoints without pickle.

``save_safetensors``/``load_safetensors`` write and read the ``safetensors`` format byte for byte
as that library does; ``load_torch`` reads ``torch.save`` files with a restricted unpickler that
rebuilds tensors and dicts only; ``from_torchvision`` maps a torchvision state dict onto a zoo
model. None of them imports torch or safetensors.
"""

from dualflow.interop.safetensors import load_safetensors, save_safetensors
from dualflow.interop.torch_load import load_torch
from dualflow.interop.torchvision_names import from_torchvision

__all__ = ["from_torchvision", "load_safetensors", "load_torch", "save_safetensors"]
