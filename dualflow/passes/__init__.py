"""Graph optimization passes and the pass manager (DESIGN §5).

A pass is a named function ``Graph -> Graph`` that returns its input object when it changes
nothing; ``run_passes`` runs an explicit pipeline (``O0``, ``O1``, ``O2`` or a tuple of names).

Import cycle: ``__init__`` re-exports ``manager``'s pipelines, and ``manager`` loads each pass
module by its name (``importlib``, inside this package) when a pipeline names it.
"""

from dualflow.passes.cse import cse
from dualflow.passes.dce import dce
from dualflow.passes.fold import fold
from dualflow.passes.manager import (
    O0,
    O1,
    O2,
    PASSES,
    PIPELINES,
    PassStats,
    resolve_passes,
    run_passes,
)

__all__ = [
    "O0",
    "O1",
    "O2",
    "PASSES",
    "PIPELINES",
    "PassStats",
    "cse",
    "dce",
    "fold",
    "resolve_passes",
    "run_passes",
]
