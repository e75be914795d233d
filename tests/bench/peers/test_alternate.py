"""Goals timed in alternated rounds: the peer kept warm in its own process, round ratios, a
peer that dies or answers nonsense, and the goal verdicts and table they decide."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

from dualflow.bench.harness import Measurement
from dualflow.bench.peers import alternate, child, section
from dualflow.bench.peers.alternate import PeerServer, calls_for, rounds
from dualflow.bench.peers.goals import JAX, evaluate, format_table

SERVE = """
import json, sys
_, framework, workload, warmup = sys.argv[1:]
print("framework chatter")
print("DUALFLOW_PEER_RESULT " + json.dumps({"ready": True, "mode": framework + " fake"}))
sys.stdout.flush()
for line in sys.stdin:
    words = line.split()
    if words[0] == "quit":
        break
    n = int(words[1])
    good = {"times_ms": [float(k + 1) for k in range(n)]}
    answer = [1, 2] if workload == "nonsense" else good
    print("DUALFLOW_PEER_RESULT " + json.dumps(answer))
    sys.stdout.flush()
    if workload == "dies":
        sys.exit(3)
"""


def _server(tmp_path: Path, workload: str) -> PeerServer:
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    server = PeerServer(sys.executable, "jax", workload, 1, script)
    assert server.record(timeout=60)["ready"] is True
    return server


def test_rounds_alternate_our_calls_with_the_peers(tmp_path, monkeypatch) -> None:
    order = []

    def ours(step, calls, warmup):
        order.append(("ours", calls))
        return np.full(calls, 3e-3)  # 3 ms a call

    monkeypatch.setattr(alternate, "time_calls", ours)
    server = _server(tmp_path, "mlp")
    real_time = server.time
    monkeypatch.setattr(server, "time", lambda n, t: order.append(("peer", n)) or real_time(n, t))
    try:
        ratios, _ = rounds(lambda: None, server, 5, 3, varies=False)
        # the peer's 5 calls take 1..5 ms: median 3 (ratio 1), p10 1.4 for a varying peer
        assert rounds(lambda: None, server, 5, 1, varies=True) == ([pytest.approx(3 / 1.4)], 0)
    finally:
        server.close()
    assert ratios == [1.0, 1.0, 1.0]
    assert order[:4] == [("ours", 5), ("peer", 5), ("ours", 5), ("peer", 5)]
    assert server.process.returncode == 0  # quit when asked


@pytest.mark.parametrize(
    ("workload", "message"),
    [("dies", "the peer ended"), ("nonsense", "not a JSON object")],
)
def test_a_peer_that_dies_or_answers_nonsense_is_a_value_error(tmp_path, workload, message):
    server = _server(tmp_path, workload)
    try:
        server.time(2, 60)  # "dies" answers once, then exits: its next answer never comes
        server.time(2, 60)
    except ValueError as exc:
        assert message in str(exc)
    else:
        pytest.fail("no error")
    finally:
        server.close()


def test_a_real_child_serves_a_skip_record_for_a_missing_framework(tmp_path) -> None:
    server = PeerServer(sys.executable, "nope", "mlp", 1, Path(child.__file__))
    try:
        assert server.record(timeout=60) == {"error": "unknown peer framework 'nope'"}
    finally:
        server.close()


def test_calls_per_round_follow_the_cells_median() -> None:
    assert [calls_for(ms) for ms in (1000.0, 250.0, 1.0, 1e-4)] == [3, 3, 500, 500]
    assert calls_for(5.0) == 100


def test_rounds_decide_the_goal_and_the_table_shows_them() -> None:
    ours = Measurement("mlp", "compiled", 4.0, 3.9, 4.1, 9, 0)
    jax = Measurement("mlp", JAX, 5.0, 4.9, 5.1, 9, 0)
    key = ("mlp", "compiled", JAX)
    (result,) = evaluate([ours, jax], {key: [1.1, 1.05, 1.2]})
    assert (result.ratio, result.holds, result.cell_ratio) == (1.1, False, 0.8)
    line = format_table([ours, jax], [], "footer", {key: [1.1, 1.05, 1.2]}).splitlines()[1]
    assert "NO (1.10x over 3 rounds, 1.05-1.20)" in line


def test_report_alternates_each_goal_with_both_rows(monkeypatch) -> None:
    asked = []

    def fake(key, step, median_ms, varies, peer, count, peer_ms):
        asked.append((key, step, median_ms, varies, peer, count, peer_ms))
        if key[2] == "torch eager":
            raise ValueError("torch is not importable")
        return alternate.Alternated(*key, 9, [0.5, 0.6], dropped=1)

    monkeypatch.setattr(section, "alternate", fake)
    monkeypatch.setattr(section, "run_peers", lambda *a: (peers, ["jax 0.1", "torch 2"]))
    peers = [Measurement("tiny-ops", m, 1.0, 0.9, 1.1, 9, 0) for m in (JAX, "torch eager")]
    rows = [Measurement("tiny-ops", m, 0.8, 0.7, 0.9, 9, 0) for m in ("eager", "compiled")]
    args = argparse.Namespace(
        peers=True, idle_wait=0.0, max_spread=0.5, attempts=1, first_calls="none",
        peers_python="py", alternate_rounds=2,
    )  # fmt: skip
    _, text, extra = section.report(
        args, ["tiny-ops"], rows, lambda n: 3, lambda n: 4, lambda n, m: f"{n} {m} step"
    )
    assert [(a[0], a[1], a[4], a[5], a[6]) for a in asked] == [
        (("tiny-ops", "compiled", JAX), "tiny-ops compiled step", ("py", 4), 2, 1.0),
        (("tiny-ops", "eager", "torch eager"), "tiny-ops eager step", ("py", 4), 2, 1.0),
    ]
    goals = {g["goal"]: (g["ratio"], g["rounds"]) for g in extra["peers"]["goals"]}
    assert goals["≤ JAX"] == (0.55, [0.5, 0.6])
    assert goals["eager ≤ 1.0× PyTorch eager"] == (0.8, None)  # the cells', its rounds failed
    assert "rounds of tiny-ops eager torch eager failed: ValueError: torch is not" in text
    assert (
        "rounds of tiny-ops compiled jax jit: 1 of 2 left out (1: the peer alone ran over" in text
    )


def test_a_round_where_the_peer_alone_slowed_is_left_out(tmp_path, monkeypatch) -> None:
    """The peer's calls take 1..5 ms (median 3). Against a peer cell of 1 ms and our steady
    3 ms (cell 3 ms) that is the peer alone 3x slower: left out, where without the cells it
    would be a ratio of 1.0; the same block beside our own 3x slowdown is the machine: kept."""
    mine = [3e-3]
    monkeypatch.setattr(alternate, "time_calls", lambda step, n, warmup: np.full(n, mine[0]))
    server = _server(tmp_path, "mlp")
    try:
        assert rounds(lambda: None, server, 5, 2, varies=False) == ([1.0, 1.0], 0)
        assert rounds(lambda: None, server, 5, 2, varies=False, cells=(3.0, 1.0)) == ([], 0)
        mine[0] = 9e-3  # ours slowed 3x too: the machine, not the peer
        assert rounds(lambda: None, server, 5, 1, varies=False, cells=(3.0, 1.0)) == ([3.0], 0)
    finally:
        server.close()


def test_a_goal_whose_every_round_the_peer_alone_slowed_has_no_rounds(tmp_path, monkeypatch):
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    monkeypatch.setattr(alternate, "time_calls", lambda step, calls, warmup: np.full(calls, 3e-3))
    with pytest.raises(
        ValueError,
        match="all 2 rounds left out: 0 with two CPUs sharing a core, the rest with the peer alone",
    ):
        alternate.alternate(
            ("mlp", "compiled", JAX), lambda: None, 3.0, False, (sys.executable, 1), 2,
            child=script, peer_ms=1.0,
        )  # fmt: skip
