"""Compatibility with PyTorch: reference outputs generated once with torch, read by the tests."""
