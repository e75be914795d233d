"""Temporaries a killed save left behind are removed by the next save of the same checkpoint
(issue 19: 43 files, 74 MB after 60 kills), and only those: a live writer's, another
checkpoint's and other files stay."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import numpy as np

import dualflow
from dualflow import serialization

_KILLED_WRITER = """
import sys, time
import numpy as np
import dualflow, dualflow.serialization as s
def stuck(file, arrays):
    file.write(b"partial"); file.flush(); print("writing", flush=True); time.sleep(300)
s._write_npz = stuck
dualflow.save({"w": np.ones(3)}, sys.argv[1])
"""


def _temporaries(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def _start_writer(path: str) -> subprocess.Popen:
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, path], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout.readline().strip() == "writing"  # its temporary exists now
    return writer


def test_a_killed_writers_temporary_is_removed_by_the_next_save(tmp_path) -> None:
    path = str(tmp_path / "ckpt.npz")
    live = _start_writer(path)  # a save still in progress elsewhere
    try:
        for _ in range(2):  # saves killed mid-write (their own cleanup keeps the live file)
            writer = _start_writer(path)
            writer.kill()
            writer.wait()
        # the second killed save already removed the first one's file: live + one dead left
        assert len(_temporaries(tmp_path)) == 2
        (tmp_path / "notes.tmp").write_text("mine")  # not a checkpoint temporary
        other = tmp_path / f".ckpt.npz.bak.{socket.gethostname()}-1.abcdefgh.tmp"
        other.write_text("another checkpoint's name sharing the prefix")
        dualflow.save({"w": np.arange(3.0)}, path)
        left = _temporaries(tmp_path)
        assert f"-{live.pid}." in " ".join(left)  # the live writer's file is untouched
        assert len([n for n in left if n.startswith(".ckpt.npz.") and "bak" not in n]) == 1
        assert "notes.tmp" in left and other.name in left
        assert dualflow.load(path)["w"].tolist() == [0.0, 1.0, 2.0]
    finally:
        live.kill()
        live.wait()


def test_temporaries_without_a_writer_are_removed_once_stale(tmp_path) -> None:
    path = str(tmp_path / "ckpt.npz")
    fresh, old = tmp_path / ".ckpt.npz.abcdefgh.tmp", tmp_path / ".ckpt.npz.zyxwvuts.tmp"
    fresh.write_text("")
    old.write_text("")
    stale = time.time() - serialization.STALE_SECONDS - 60
    os.utime(old, (stale, stale))  # from an older dualflow (no writer in the name)
    removed = serialization.remove_stale_temporaries(path)
    assert removed == [str(old)] and fresh.exists()
