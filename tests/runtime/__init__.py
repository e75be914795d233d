"""Tests of dualflow.runtime."""
