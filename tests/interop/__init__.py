"""Tests of dualflow.interop."""
