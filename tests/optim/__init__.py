"""Tests of dualflow.optim: update rules, param groups, state dicts, clipping and schedulers."""
