"""Tests of the runnable examples in examples/."""
