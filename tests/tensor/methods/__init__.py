"""Tests of dualflow.tensor.methods: PyTorch-named Tensor methods."""
