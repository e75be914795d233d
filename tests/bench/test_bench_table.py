"""The bench table's rate columns: ``% alone`` (a compiled row's matmuls alone in numpy over
inside its plans) shows only when a row has it, as a percentage."""

from __future__ import annotations

from dualflow.bench.harness import Measurement
from dualflow.bench.table import add_rates, format_table
from dualflow.runtime.machine_rates import MachineRates


def _column(table: str, title: str) -> list[str]:
    header, *lines = table.splitlines()
    start = header.index(title)
    return [line[start : start + len(title)].strip() for line in lines]


def test_the_alone_share_is_a_percentage_column_of_rows_that_have_it() -> None:
    rates = MachineRates(400.0, 20.0, 2)
    eager = Measurement("w", "eager", 4.0, 3.9, 4.1, 3, 0)
    compiled = Measurement("w", "compiled", 2.0, 1.9, 2.1, 3, 0, gemm_alone=0.874)
    for row in (eager, compiled):
        add_rates(row, 4e8, None, rates)
    assert _column(format_table([eager, compiled]), "% alone") == ["-", "87"]
    assert "% alone" not in format_table([eager])
