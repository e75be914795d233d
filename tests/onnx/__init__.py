"""Tests of dualflow.onnx."""
