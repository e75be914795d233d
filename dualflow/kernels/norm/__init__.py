"""Normalization kernels on host arrays: training batch norm's forward (``batch_norm``) and
backward (``batch_norm_grad``)."""
