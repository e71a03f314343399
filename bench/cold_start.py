"""Cold start end to end: a whole process per run, from an installed wheel, against DynamoDB Local.

Each run is a fresh interpreter running one of the scripts in ``bench/cold_handlers/``: it imports what its
handler needs, builds its client at module level, and processes one SQS record (a first delivery: PutItem, then
UpdateItem). The three scripts are ours (``BatchProcessor`` + DynamoDB store), Powertools (``BatchProcessor`` +
``@idempotent_function``) and a bare boto3 client sending the same two requests with no library. The time of a
run is the parent's wall clock from spawning the process to its exit.

How: the scripts run in a venv of their own (``bench/.cold-venv``, made on first use) holding boto3 and
Powertools at the benchmark environment's versions and our distribution installed from a wheel built from this
tree (rebuilt on every run: no editable install, whose import hook would count too), its site-packages compiled
to bytecode. The children get a clean environment (no ``PYTHONPATH``, no ``PYTHONDONTWRITEBYTECODE``). After
warm-up rounds that are not counted, rounds run the commands one after another (ours, bare, Powertools, ours,
bare, ...), so a change of load on the machine hits all three alike; each round gives one ratio to the bare run
of the same round, and a row is the median of those ratios with their spread.

Two clocks per run: to the process's exit (the target's measure), and to the handler's response (a line each
script prints once its handler has returned). What lies between is the interpreter's exit (its module teardown
and last garbage collections), which a Lambda function never runs on an invocation's path: the runtime answers,
and the process is frozen, then killed.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HANDLERS = HERE / "cold_handlers"
VENV = HERE / ".cold-venv"
COMMANDS = ("ours", "bare", "powertools")  # the order of the commands within a round


def _requirements() -> list[str]:
    """What the cold venv holds beside our wheel: the benchmark environment's versions, and the wheel builder."""
    pinned = [f"{name}=={metadata.version(name)}" for name in ("boto3", "botocore", "aws-lambda-powertools")]
    return [*pinned, "build>=1.2", "setuptools>=77.0.3"]


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def prepare() -> Path:
    """Make (or refresh) the cold venv and install a wheel of this tree into it; returns its interpreter."""
    requirements = _requirements()
    marker = VENV / ".requirements"
    python = _venv_python()
    if not python.exists() or not marker.exists() or marker.read_text() != "\n".join(requirements):
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *requirements], check=True)
        marker.write_text("\n".join(requirements))
    with tempfile.TemporaryDirectory() as out:
        # The builder is the cold venv's own (it has build and setuptools); --no-isolation: no network needed. The
        # wheel is built from the sdist, in a folder of its own: built here, it would leave a build/ folder in the
        # checkout, which `python -m build` run there takes for the build package.
        subprocess.run([str(python), "-m", "build", "--no-isolation", "--outdir", out, str(ROOT)],
                       check=True, capture_output=True)  # fmt: skip
        (wheel,) = Path(out).glob("idempotent_consumer-*.whl")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel)],
                       check=True)  # fmt: skip
        # Its dependencies (jmespath, aws-lambda-typing), from the wheel's own metadata.
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run([str(python), "-m", "compileall", "-q", site_packages, str(HANDLERS)], check=True)
    return python


def child_environment(endpoint_url: str, table: str) -> dict[str, str]:
    """A clean environment: where DynamoDB is, the region and dummy credentials, and nothing of ours."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),  # noqa: S108 - only where boto3 looks for (absent) config files
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint_url,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "COLD_START_TABLE": table,
    }


def run_once(python: Path, command: str, env: dict[str, str]) -> tuple[float, float]:
    """Milliseconds from spawning ``python cold_handlers/<command>.py`` to its response, and to its (clean) exit."""
    script = str(HANDLERS / f"{command}.py")
    message_id = f"{command}-{uuid.uuid4()}"
    started = time.perf_counter()
    with subprocess.Popen([str(python), script, message_id], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as child:  # fmt: skip
        assert child.stdout is not None  # noqa: S101 - piped above
        line = child.stdout.readline()
        responded = time.perf_counter()
        _, stderr = child.communicate()
        exited = time.perf_counter()
    if child.returncode != 0 or line != "responded\n":
        raise RuntimeError(f"{command} failed ({child.returncode}): {line!r} {stderr[-2000:]}")
    return (responded - started) * 1000, (exited - started) * 1000


@dataclass
class Measurement:
    """Every counted run's milliseconds per command, and the paired ratios to the bare run of each round."""

    times: dict[str, list[float]]
    ratios: dict[str, list[float]]
    load: tuple[float, float]  # 1-minute load average before and after

    def median_ms(self, command: str) -> float:
        return statistics.median(self.times[command])

    def median_ratio(self, command: str) -> float:
        return statistics.median(self.ratios[command])

    def spread(self, command: str) -> str:
        """The inter-quartile range, then min-max, of the paired ratios."""
        ratios = sorted(self.ratios[command])
        if len(ratios) >= 2:
            low, _, high = statistics.quantiles(ratios, n=4)
        else:
            low = high = ratios[0]
        return f"{low:.3f}-{high:.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})"


def _paired(times: dict[str, list[float]], load: tuple[float, float]) -> Measurement:
    ratios = {
        command: [mine / bare for mine, bare in zip(times[command], times["bare"], strict=True)]
        for command in ("ours", "powertools")
    }
    return Measurement(times, ratios, load)


def measure(endpoint_url: str, table: str, rounds: int, warmups: int) -> tuple[Measurement, Measurement]:
    """``warmups`` uncounted rounds, then ``rounds`` counted ones, each running every command once in turn.

    Returns the times to the processes' exits, and to their responses.
    """
    python = prepare()
    env = child_environment(endpoint_url, table)
    exits: dict[str, list[float]] = {command: [] for command in COMMANDS}
    responses: dict[str, list[float]] = {command: [] for command in COMMANDS}
    load_before = os.getloadavg()[0]
    for round_number in range(warmups + rounds):
        timings = {command: run_once(python, command, env) for command in COMMANDS}
        if round_number >= warmups:
            for command, (response_ms, exit_ms) in timings.items():
                responses[command].append(response_ms)
                exits[command].append(exit_ms)
    load = (load_before, os.getloadavg()[0])
    return _paired(exits, load), _paired(responses, load)


def end_to_end(server: Any, rounds: int, warmups: int) -> list[Any]:
    """The end-to-end rows: milliseconds per process, and the median paired ratio to the bare client."""
    from run import Row

    table = server.create_table()
    m, r = measure(server.endpoint_url, table, rounds, warmups)
    ours, theirs = m.median_ratio("ours"), m.median_ratio("powertools")
    load = f"load {m.load[0]:.1f}->{m.load[1]:.1f}"
    return [
        Row(f"cold start end to end, 1 SQS record, DynamoDB Local (bare boto3: {m.median_ms('bare'):.0f})",
            round(m.median_ms("ours"), 1), round(m.median_ms("powertools"), 1), "ms",
            round(m.median_ms("ours") / m.median_ms("powertools"), 3), "-", True),
        Row(f"cold start end to end / bare boto3: median of {rounds} paired ratios", round(ours, 3), round(theirs, 3),
            "x", None, "<= 1.05x", ours <= 1.05),
        Row(f"cold start end to end / bare boto3: IQR (min-max), {load}", m.spread("ours"), m.spread("powertools"),
            "x", None, "-", True),
        Row(f"cold start to the response (no interpreter exit; bare boto3: {r.median_ms('bare'):.0f})",
            round(r.median_ms("ours"), 1), round(r.median_ms("powertools"), 1), "ms",
            round(r.median_ms("ours") / r.median_ms("powertools"), 3), "-", True),
        Row("cold start to the response / bare boto3: median paired ratio, IQR",
            f"{r.median_ratio('ours'):.3f}, {r.spread('ours').split(' ')[0]}",
            f"{r.median_ratio('powertools'):.3f}, {r.spread('powertools').split(' ')[0]}", "x", None, "-", True),
    ]  # fmt: skip
