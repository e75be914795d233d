"""Test-wide settings: verify the IR after every optimization pass (DESIGN §5)."""

import os

os.environ.setdefault("DUALFLOW_VERIFY_PASSES", "1")
