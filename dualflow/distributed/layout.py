"""What differs between the ranks' layouts (multi-node optimizer, ``bcast_params``), as one error.

The optimizer agrees on a checksum of its (name, shape, dtype) list, bucket settings and step
count each step; when the ranks disagree, they all-gather the details and ``explain_layouts``
raises naming the first parameter, the settings or the step counts that differ.
"""

from __future__ import annotations

from dualflow.errors import CommunicatorError


def explain_layouts(everyone: list[tuple]) -> None:
    """Raise CommunicatorError saying how the ranks' (specs, settings, steps) differ, if they do.

    Example:
        >>> layout = [("w", (2,), "float32")]
        >>> try:
        ...     explain_layouts([(layout, (8, None), 3), (layout, (8, None), 2)])
        ... except CommunicatorError as exc:
        ...     print(str(exc)[:70])
        multi-node optimizer: the ranks are at different steps (step() calls s
    """
    _check_same_everywhere([specs for specs, _, _ in everyone])
    settings = [setting for _, setting, _ in everyone]
    if len(set(settings)) > 1:
        raise CommunicatorError(
            "multi-node optimizer: the ranks use different (bucket bytes, grad_dtype), in rank "
            f"order: {settings}; pass the same bucket_mb and grad_dtype on every rank"
        )
    steps = [count for _, _, count in everyone]
    if len(set(steps)) > 1:
        raise CommunicatorError(
            "multi-node optimizer: the ranks are at different steps (step() calls so far, in "
            f"rank order: {steps}): a rank skipped step(), or took an extra one"
        )


def _check_same_everywhere(everyone: list[list[tuple]]) -> None:
    """Raise CommunicatorError naming the first (name, shape, dtype) where a rank differs."""
    ref = everyone[0]
    for rank, theirs in enumerate(everyone):
        if theirs == ref:
            continue
        first = next(
            (i for i, (a, b) in enumerate(zip(ref, theirs)) if a != b), min(len(ref), len(theirs))
        )
        raise CommunicatorError(
            f"multi-node optimizer: rank {rank}'s parameters differ from rank 0's at parameter "
            f"#{first}: rank 0 has {_describe(ref, first)}, rank {rank} has "
            f"{_describe(theirs, first)} ({len(ref)} vs {len(theirs)} parameters); every rank "
            "must optimize the same model (pass model= to pack in the model's order)"
        )


def _describe(specs: list[tuple], index: int) -> str:
    if index >= len(specs):
        return "nothing"
    name, shape, dtype = specs[index]
    return f"{name!r} {shape} {dtype}"


def compare_structure(root_list: list, other: list, root: int, rank: int) -> None:
    """Raise CommunicatorError naming the first (name, shape, dtype) where ``other`` differs
    from ``root_list`` (``bcast_params``: every rank compares every rank's list with root's).

    Example:
        >>> compare_structure([("w", (2,), "float32")], [("w", (2,), "float32")], 0, 1)
    """
    for index in range(max(len(root_list), len(other))):
        want = root_list[index] if index < len(root_list) else None
        got = other[index] if index < len(other) else None
        if want != got:
            raise CommunicatorError(
                f"bcast_params: rank {rank}'s model differs from rank {root}'s at parameter "
                f"#{index}: rank {root} has {_entry(want)}, rank {rank} has {_entry(got)}; "
                "build the same model on every rank"
            )


def _entry(entry: tuple | None) -> str:
    if entry is None:
        return "nothing"
    name, shape, dtype = entry
    return f"{name!r} {shape} {dtype}"
