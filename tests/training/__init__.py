"""Tests of dualflow.training."""
