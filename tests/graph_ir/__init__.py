"""Tests of dualflow.graph_ir."""
