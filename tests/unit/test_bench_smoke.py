"""The benchmark runs end to end with tiny sizes (so it never rots); its figures are not judged here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"


def test_bench_smoke_run_measures_both_libraries(tmp_path):
    assert BENCH_PYTHON.exists(), "the benchmark environment is missing: run `make install`"
    out = tmp_path / "rows.json"
    result = subprocess.run([str(BENCH_PYTHON), "bench/run.py", "--smoke", "--json", str(out)], cwd=ROOT,
                            capture_output=True, text=True, env=dict(os.environ), timeout=600, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "aws-lambda-powertools 3.37.0" in result.stdout
    rows = {row["scenario"]: row for row in json.loads(out.read_text())}
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
