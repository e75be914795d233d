"""The fixed size sequences the variable-shape workloads call their step with (issue 39).

Standard library only: dualflow's workloads (``dualflow.bench.shape_workloads``) and their
PyTorch peers (``torch_workloads``, run under another interpreter) both import it, so every
framework steps through the same sizes in the same order.
"""

from __future__ import annotations

import random

CALLS = 40  # one pass over a sequence; the bench's timed calls cycle through it


def draw(low: int, high: int, seed: int, calls: int = CALLS) -> list[int]:
    """``calls`` sizes drawn uniformly from ``low..high`` (inclusive) by a seeded generator.

    Example:
        >>> draw(1, 4, 0, 6) == draw(1, 4, 0, 6), min(draw(1, 4, 0, 50)), max(draw(1, 4, 0, 50))
        (True, 1, 4)
    """
    generator = random.Random(seed)
    return [generator.randint(low, high) for _ in range(calls)]


BATCH_SIZES = draw(1, 128, 39)  # variable-batch: the MLP step's batch sizes
SEQ_LENGTHS = draw(5, 60, 40)  # variable-seq: the LM step's sequence lengths
INFER_BATCHES = draw(1, 16, 41)  # variable-batch-infer: the CNN's inference batch sizes
