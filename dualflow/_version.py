"""The package version, in a bottom module so that any layer may read it (plan-cache keys)."""

__version__ = "0.1.0"
