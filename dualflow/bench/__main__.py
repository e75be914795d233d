"""``python -m dualflow.bench``: the same as ``dualflow bench``."""

import sys

from dualflow.bench.cli import main

sys.exit(main())
