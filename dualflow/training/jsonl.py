"""Metric logs as JSON lines: one self-contained JSON object per line, appended as they happen.

A line is written and flushed per record, so a crashed run keeps every record before the crash
and a resumed run appends to the same file.
"""

from __future__ import annotations

import json
import os
from typing import Any


class JsonlLogger:
    """Append records (dicts of plain values) to ``path``, one JSON object per line.

    Args:
        path: the log file; its directory must exist.
        append: keep existing lines (a resumed run); otherwise the file starts empty.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "log.jsonl")
        >>> log = JsonlLogger(path); log.write({"event": "epoch", "loss": 0.5})
        >>> read_jsonl(path)
        [{'event': 'epoch', 'loss': 0.5}]
    """

    def __init__(self, path: str | os.PathLike, append: bool = False) -> None:
        self.path = os.fspath(path)
        if not append:
            with open(self.path, "w", encoding="utf-8"):
                pass  # truncate now, so an unwritable path fails before training starts

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line (non-finite floats are written as NaN/Infinity)."""
        line = json.dumps(record, separators=(", ", ": "))
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every record of a JSON-lines file, in order (blank lines are skipped).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "log.jsonl")
        >>> _ = open(path, "w").write('{"a": 1}\\n\\n{"a": 2}\\n')
        >>> read_jsonl(path)
        [{'a': 1}, {'a': 2}]
    """
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]
