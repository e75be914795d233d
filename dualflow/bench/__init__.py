"""Benchmarks: built-in workloads timed per execution mode (``dualflow bench``, DESIGN §10).

Performance targets live here as reported numbers, never as timed assertions in tests.

Import cycle: ``workloads`` is the table of every workload, and ``memory_workloads`` builds its
autocast MLP from the table's MLP helpers (imported at call time).
"""

import os

from dualflow.errors import count_as_user_code

# The workloads are user code: their lines are where ops come from (errors, graph locations),
# not the bench's caller (``<frozen runpy>`` under ``python -m``), and the environment probe
# follows them like a user's training script.
count_as_user_code(os.path.dirname(os.path.abspath(__file__)))
