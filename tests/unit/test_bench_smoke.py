"""The benchmark runs end to end with tiny sizes (so it never rots); its figures are not judged here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    assert BENCH_PYTHON.exists(), "the benchmark environment is missing: run `make install`"
    folder = tmp_path_factory.mktemp("bench")
    out, picture = folder / "rows.json", folder / "bench.png"
    command = [str(BENCH_PYTHON), "bench/run.py", "--smoke", "--json", str(out), "--plot", str(picture)]
    before = {p.name for p in ROOT.iterdir()}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ), timeout=600,
                            check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    left = {p.name for p in ROOT.iterdir()} - before
    return result.stdout, {row["scenario"]: row for row in json.loads(out.read_text())}, picture, left


def test_bench_smoke_run_leaves_no_build_folder_in_the_checkout(smoke_run):
    # A build/ folder in the checkout is what `python -m build` run there imports instead of the build package.
    *_, left = smoke_run
    assert "build" not in left


def test_bench_smoke_run_measures_both_libraries(smoke_run):
    stdout, rows, *_ = smoke_run
    assert "aws-lambda-powertools 3.37.0" in stdout
    for row in rows.values():
        assert row["ours"] != "-", row
    overhead = next(r for name, r in rows.items() if name.startswith("overhead"))
    assert overhead["ours"] > 0
    assert overhead["powertools"] > 0
    requests = [
        rows[f"DynamoDB requests/record, {what}"]["ours"]
        for what in ("first delivery", "redelivery", "cached redelivery")
    ]
    assert requests == [2, 1, 0]
    written = [rows[f"DynamoDB requests/record, {way}"]["ours"]
               for way in ("a write with the record (guard.write)", "the write, then the commit")]  # fmt: skip
    assert written == [2, 3]


def test_bench_smoke_run_measures_the_async_rows(smoke_run):
    _, rows, *_ = smoke_run
    async_rows = [row for name, row in rows.items() if name.startswith("async")]
    kinds = [row["scenario"].split(",")[0].split(":")[0] for row in async_rows]
    assert kinds == ["async overhead"] + ["async latency"] * 4
    overhead, latency, floor, bare, native = async_rows
    assert overhead["ours"] > 0
    assert overhead["powertools"] > 0
    # Every store call waits 10 ms, two a record: Powertools makes its 10 records' calls one after another.
    assert latency["powertools"] >= 10 * 2 * 10
    assert latency["ours"] >= 2 * 10
    assert floor["ours"] >= 1
    assert bare["ours"] >= 1
    assert native["ours"] >= 1


def test_bench_smoke_run_measures_the_redis_rows(smoke_run):
    stdout, rows, *_ = smoke_run
    assert "redis 8.1.0" in stdout
    trips = [rows[f"Redis round trips/record, {what}"] for what in ("first delivery", "duplicate", "cached duplicate")]
    assert [row["ours"] for row in trips] == [2, 1, 0]
    # Powertools 3.37.0: SET NX then SET; a duplicate is SET NX, then GET twice (its layer, then its decorator);
    # with its local cache on from the start, nothing.
    assert [row["powertools"] for row in trips] == [2, 3, 0]
    fresh = next(row for name, row in rows.items() if name.startswith("Redis round trips/record, first 10-record"))
    assert fresh["ours"] > 2  # connecting and loading the scripts count too
    timed = [row for name, row in rows.items() if name.startswith(("Redis latency", "Redis overhead"))]
    assert len(timed) == 3
    for row in timed:
        assert row["ours"] > 0
        assert row["powertools"] > 0


def test_bench_smoke_run_measures_cold_start_end_to_end(smoke_run):
    _, rows, *_ = smoke_run
    cold = [row for name, row in rows.items() if name.startswith("cold start end to end")]
    assert len(cold) == 3
    times, ratios, spread = cold
    # Whole processes (an interpreter, boto3, two DynamoDB requests): never under a few milliseconds.
    assert times["ours"] > 10
    assert times["powertools"] > 10
    assert ratios["ours"] > 0
    assert ratios["powertools"] > 0
    assert ratios["target"] == "<= 1.05x"
    assert "-" in spread["ours"]
    response, response_ratios = [row for name, row in rows.items() if name.startswith("cold start to the response")]
    # The response comes before the interpreter's exit.
    assert 10 < response["ours"] <= times["ours"]
    assert 10 < response["powertools"] <= times["powertools"]
    assert float(response_ratios["ours"].split(",")[0]) > 0
    assert any(name.startswith("cold start, import only") for name in rows)


def test_bench_smoke_run_draws_the_picture_where_it_is_told(smoke_run):
    stdout, rows, picture, _ = smoke_run
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"picture: {picture}" in stdout
    # The points it draws: per-record time by batch size, and the 10-record latency against its floor.
    assert [row["records"] for row in rows.values() if row["plot"] == "scale"] == [10, 100]
    assert rows["latency: floor, 2 round trips of 10 ms"]["ours"] >= 20
