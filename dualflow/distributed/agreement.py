"""Collective agreement: ranks compare what they are about to do before any data moves.

Every collective of a communicator gets the next per-communicator sequence number and a signature
(op, shape, dtype, bucket) with the user's call site. One small max-allreduce of int64 numbers
tells every rank whether all ranks are at the same collective; if not, every rank gets the others'
descriptions and raises the same ``CommunicatorError`` naming each rank's call site, instead of
pairing mismatched MPI calls (which hangs or corrupts memory).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.errors import CommunicatorError, user_frame
from dualflow.ops.collective import note_collective

# What a rank is doing at a check: a collective, a compiled call deciding plan-or-eager, or exit.
KIND_COLLECTIVE, KIND_CALL, KIND_EXIT = 1, 2, 3
# A compiled call's vote: run the plan, fall back to eager (with everyone), or this rank failed.
OK, EAGER, FAILED = 0, 1, 2
EXIT_TEXT = "exit (sys.exit() or the end of the script)"


class CollectiveMismatch(CommunicatorError):
    """The ranks are at different collectives; ``positions`` holds each rank's, in rank order."""

    def __init__(self, message: str, positions: list[Position]) -> None:
        super().__init__(message)
        self.positions = positions


@dataclass(frozen=True)
class Position:
    """One rank's place in the sequence of collectives of one communicator."""

    seq: int
    kind: int
    text: str
    site: str
    flag: int = OK
    detail: str = ""
    state: str = ""  # compared even where ``text`` need not match (a compiled call's step count)

    def describe(self) -> str:
        """``#12 allreduce mean float32[67] bucket 0 at train.py:30`` (and the detail)."""
        state = f" {self.state}" if self.state else ""
        where = f" at {self.site}" if self.site else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"#{self.seq} {self.text}{state}{where}{detail}"


def call_site() -> str:
    """``file.py:LINE`` of the innermost frame outside dualflow (the user's line), or ``""``.

    Example:
        >>> call_site().startswith("<doctest")
        True
    """
    frame = user_frame(2)
    return "" if frame is None else f"{os.path.basename(frame[0])}:{frame[1]}"


def signature_hash(kind: int, text: str) -> int:
    """A 56-bit hash of a signature (fits int64 with room for the negation the check uses).

    Example:
        >>> signature_hash(KIND_COLLECTIVE, "barrier") == signature_hash(KIND_COLLECTIVE, "barrier")
        True
    """
    digest = hashlib.blake2b(f"{kind}:{text}".encode(), digest_size=7).digest()
    return int.from_bytes(digest, "little")


def describe_array(op: str, array: Any, reduction: str = "", bucket: int | None = None) -> str:
    """The signature text of an array collective: ``allreduce mean float32[2,3] bucket 1``.

    Example:
        >>> describe_array("allreduce", np.zeros((2, 3), np.float32), "mean", 1)
        'allreduce mean float32[2,3] bucket 1'
    """
    dims = ",".join(str(d) for d in array.shape)
    text = f"{op} {reduction} " if reduction else f"{op} "
    text += f"{np.dtype(array.dtype).name}[{dims}]"
    return text if bucket is None else f"{text} bucket {bucket}"


def array_problem(array: Any) -> str:
    """Why ``array`` cannot travel as a buffer (``""`` if it can): its dtype has no fixed-size,
    native-order numbers in it. Checked before any data moves, the same way on every backend.

    Example:
        >>> array_problem(np.zeros(2, np.float32)), array_problem(np.array([None]))
        ('', 'dtype object cannot travel as a buffer: only bool and numbers can')
    """
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "biufc":
        return f"dtype {dtype} cannot travel as a buffer: only bool and numbers can"
    if not dtype.isnative:
        return f"dtype {dtype.str} is not in this machine's byte order: convert it first"
    return ""


class Ledger:
    """The sequence counter of one communicator and the check every collective passes first.

    ``comm`` provides ``_exchange_max(int64 array) -> elementwise max over ranks``,
    ``_allgather_raw(obj)`` (unchecked), ``_arm(position)``/``_disarm(token)`` (watchdog),
    ``rank``, ``size`` and ``name``.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> comm.ledger.check(KIND_COLLECTIVE, "barrier"), comm.ledger.seq
        (0, 1)
    """

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.seq = 0
        self.last: Position | None = None

    def count(self, kind: int, text: str, site: str = "") -> Position:
        """Take the next sequence number without an exchange (a collective already agreed)."""
        note_collective(self.comm.comm_id)
        self.seq += 1
        self.last = Position(self.seq, kind, text, site)
        return self.last

    def check(
        self,
        kind: int,
        text: str,
        site: str | None = None,
        flag: int = OK,
        detail: str = "",
        state: str = "",
    ) -> int:
        """Compare this rank's next collective with every rank's; return the highest flag.

        ``state`` must match on every rank even where ``text`` need not (a compiled call
        voting eager); a ``FAILED`` flag with a ``detail`` is a rank that cannot take part
        (bad arguments found before any data moved, or a failed compiled call).

        Raises:
            CommunicatorError: the ranks are at different collectives (every rank raises it,
                naming each rank's collective and call site), or a rank voted ``FAILED``.
        """
        note_collective(self.comm.comm_id)
        self.seq += 1
        where = call_site() if site is None else site
        position = self.last = Position(self.seq, kind, text, where, flag, detail, state)
        h, s = signature_hash(kind, text), signature_hash(0, state)
        vector = np.array([flag, kind, -kind, h, -h, self.seq, -self.seq, s, -s], np.int64)
        if self.comm.size == 1:
            if flag >= FAILED and kind == KIND_COLLECTIVE:
                raise CommunicatorError(failure_message(self.comm, [position]))
            return flag
        token = self.comm._arm(position)
        try:
            top = self.comm._exchange_max(vector)
        finally:
            self.comm._disarm(token)
        same = top[1] == -top[2] and top[5] == -top[6]
        # a failed rank's state (its step count, rolled back) need not match: it failed
        same = same and (top[7] == -top[8] or top[0] >= FAILED)
        # a compiled call where some rank falls back: every rank falls back, plans need not match
        same = same and (top[3] == -top[4] or (kind == KIND_CALL and top[0] >= EAGER))
        if same and top[0] < FAILED:
            return int(top[0])
        everyone = self.comm._allgather_raw(position)
        if not same:
            raise CollectiveMismatch(divergence_message(self.comm, everyone), everyone)
        raise CommunicatorError(failure_message(self.comm, everyone))


def _rank_list(ranks: list[int]) -> str:
    label = "rank" if len(ranks) == 1 else "ranks"
    return f"{label} {', '.join(map(str, ranks))}"


def _grouped(everyone: list[Position], describe: Any) -> list[str]:
    groups: dict[str, list[int]] = {}
    for rank, position in enumerate(everyone):
        groups.setdefault(describe(position), []).append(rank)
    return [f"  {_rank_list(ranks)}: {text}" for text, ranks in groups.items()]


def divergence_message(comm: Any, everyone: list[Position]) -> str:
    """The text every rank raises when the ranks are at different collectives.

    Example:
        >>> class C: rank, size, name = 0, 2, "mpi"
        >>> everyone = [Position(3, KIND_COLLECTIVE, "barrier", "a.py:1"),
        ...             Position(3, KIND_EXIT, EXIT_TEXT, "")]
        >>> print(divergence_message(C(), everyone))
        ranks disagree at collective #3 of the mpi communicator (2 ranks):
          rank 0: #3 barrier at a.py:1
          rank 1: #3 exit (sys.exit() or the end of the script)
          (a rank is exiting: sys.exit(), or its script ended, while others wait; this is rank 0)
    """
    first = min(p.seq for p in everyone)
    head = f"ranks disagree at collective #{first} of the {comm.name} communicator"
    lines = [f"{head} ({comm.size} ranks):"]
    lines += _grouped(everyone, Position.describe)
    ops = {p.text.split(" ")[0] for p in everyone}
    if all(p.kind == KIND_EXIT for p in everyone):
        hint = "every rank is exiting, after different numbers of optimizer steps: a step() "
        hint += "skipped on some ranks?"
    elif any(p.kind == KIND_EXIT for p in everyone):
        hint = "a rank is exiting: sys.exit(), or its script ended, while others wait"
    elif all(p.kind == KIND_CALL for p in everyone):
        hint = "compiled calls running different plans, or after different numbers of optimizer "
        hint += "steps: a branch taken or a step() skipped on some ranks?"
    elif ops == {"bcast"} and len({p.kind for p in everyone}) == 1:
        hint = "the same broadcast with different arguments: to receive root's array a rank "
        hint += "passes one of its shape and dtype; for an object, any placeholder (None)"
    elif len(ops) == 1 and len({p.kind for p in everyone}) == 1:
        hint = "the same collective with different arguments: every rank must pass the same "
        hint += "shapes and dtypes"
    else:
        hint = "every rank must issue the same collectives in the same order: a step skipped, "
        hint += "a branch taken or an exception caught on some ranks only?"
    lines.append(f"  ({hint}; this is rank {comm.rank})")
    return "\n".join(lines)


def failure_message(comm: Any, everyone: list[Position]) -> str:
    """The text every rank raises when a rank cannot take part in a collective (its arguments
    are wrong: nothing moved on any rank), or failed inside a compiled call.

    Example:
        >>> class C: rank, size, name = 1, 2, "mpi"
        >>> everyone = [Position(3, KIND_COLLECTIVE, "bcast root=0 float32[2]", "a.py:1"),
        ...             Position(3, KIND_COLLECTIVE, "bcast root=0 float32[2]", "a.py:1", FAILED,
        ...                      "rank 1's array is read-only")]
        >>> for part in failure_message(C(), everyone).split("; "): print(part)
        collective #3 bcast root=0 float32[2] at a.py:1 cannot run: rank 1's array is read-only
        no data moved on any rank (this is rank 1)
    """
    failed = [r for r, p in enumerate(everyone) if p.flag >= FAILED]
    first = everyone[failed[0]]
    if first.kind == KIND_COLLECTIVE:
        where = f" at {first.site}" if first.site else ""
        problems = "; ".join(dict.fromkeys(everyone[r].detail for r in failed))
        return (
            f"collective #{first.seq} {first.text}{where} cannot run: {problems}; no data "
            f"moved on any rank (this is rank {comm.rank})"
        )
    detail = first.detail or "an exception"
    return (
        f"{_rank_list(failed)} failed in a compiled call that issues collectives "
        f"({everyone[failed[0]].text} at {everyone[failed[0]].site}): {detail}; this call "
        f"cannot complete on any rank (this is rank {comm.rank})"
    )
