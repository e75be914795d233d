"""Tests of the optimization passes and the pass manager."""
