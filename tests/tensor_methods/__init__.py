"""Tests of dualflow.tensor_methods: PyTorch-named Tensor methods."""
