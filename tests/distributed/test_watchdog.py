"""Issue 36, item 4: the collective timeout is validated wherever it is set (``comm.timeout``,
``LoopbackHub.timeout``, ``DUALFLOW_COLLECTIVE_TIMEOUT``), and a failing watchdog thread ends the
job loudly instead of dying silently. (The exit check under the timeout is an MPI test:
``test_mpi_promises.py``.)
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pytest

from dualflow.distributed import create_communicator
from dualflow.distributed.watchdog import Watchdog
from dualflow.errors import ConfigError

BAD = ["5", math.nan, math.inf, -math.inf, 0, -1.0, True, [3.0], np.array([1.0, 2.0])]


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("owner", ["comm", "hub"])
def test_a_bad_timeout_is_refused_where_it_is_set(owner: str, value: Any) -> None:
    comm = create_communicator("loopback", timeout=7)
    target = comm if owner == "comm" else comm.hub
    name = type(target).__name__
    with pytest.raises(ConfigError, match=rf"{name}.timeout=.* must be a finite number of seconds"):
        target.timeout = value
    assert target.timeout == (7.0 if owner == "comm" else 300.0)  # unchanged


def test_a_good_timeout_is_kept_as_seconds_and_none_means_the_default() -> None:
    comm = create_communicator("loopback")
    comm.timeout = 2
    assert comm.timeout == 2.0 and type(comm.timeout) is float
    comm.timeout = np.float32(0.5)
    assert comm.timeout == 0.5
    comm.timeout = None
    assert comm.timeout == 300.0


@pytest.mark.parametrize("text", ["inf", "nan", "-inf", "0", "-3", "soon", "1e999"])
def test_the_environment_variable_is_refused_unless_finite_and_positive(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("DUALFLOW_COLLECTIVE_TIMEOUT", text)
    with pytest.raises(
        ConfigError,
        match=rf"DUALFLOW_COLLECTIVE_TIMEOUT='{text}' must be a finite number of seconds > 0",
    ):
        create_communicator("loopback")


class _BrokenComm:
    """A watched communicator whose timeout cannot be read: the watchdog's loop fails."""

    rank, name, _armed = 0, "fake", None

    def __init__(self) -> None:
        self.aborted: list[str] = []

    @property
    def timeout(self) -> float:
        raise RuntimeError("the timeout is unreadable")

    def abort(self, message: str) -> None:
        self.aborted.append(message)


def test_a_failing_watchdog_thread_aborts_the_job_loudly() -> None:
    exited = threading.Event()
    codes: list[int] = []

    def exit(code: int) -> None:
        codes.append(code)
        exited.set()

    watchdog, comm = Watchdog(exit=exit), _BrokenComm()
    watchdog.watch(comm)
    assert exited.wait(30), "the watchdog thread died without ending the job"
    assert codes == [1]
    (message,) = comm.aborted
    assert message.startswith("[dualflow] the collective watchdog failed (RuntimeError: the ")
    assert "so the job is aborted" in message and "Traceback" in message
