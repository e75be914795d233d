"""Tests of dualflow.utils (PyTorch's torch.utils namespace)."""
