"""Normalization kernels on host arrays: training batch norm's forward (``batch_norm``)."""
