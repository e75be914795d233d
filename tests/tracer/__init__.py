"""Tests of dualflow.compile (the tracer)."""
