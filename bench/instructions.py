"""Instruction counts under callgrind: a guard against regressions that wall time cannot give on a shared machine.

.venv/bin/python bench/instructions.py            # count once, compare with bench/instruction_budget.json
.venv/bin/python bench/instructions.py --repeat 3 # count three times, show the spread, compare the median
.venv/bin/python bench/instructions.py --update   # rewrite the budget on purpose (make budget)

One process runs under ``valgrind --tool=callgrind`` and calls ``os.getppid()`` between phases: callgrind dumps its
counters before each call to libc's ``getppid`` (``--dump-before``) and starts them afresh, so each dump holds one
phase alone. The phases: a cold ``import`` of what a DynamoDB SQS handler needs; one 10-record SQS batch on the
in-memory store (after a warm-up batch); one batch of ``LARGE`` records. Per record is the difference of the two
batches over the difference of their sizes, so what an invocation pays once cancels.

Deterministic by construction: the same interpreter, PYTHONHASHSEED=0, an environment built from nothing but
PATH, bytecode written by an uncounted run first and never written while counting. Three counts agree to the
instruction or nearly (``--repeat 3`` shows it).
"""

# Only what the interpreter has loaded at start-up is imported at module level: the workload below counts the
# import of the library from a process that has not imported anything it would import.
import gc
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUDGET = os.path.join(HERE, "instruction_budget.json")
TOLERANCE = 0.05  # a count more than 5 % above its budget fails; more than 5 % below asks for a lower budget
SMALL, LARGE = 10, 1000  # records: the per-invocation batch (SQS's default size) and the per-record one
METRICS = ("import", "invocation_10_records", "per_record")
INSTALL_HINT = (
    "valgrind is not on PATH: the instruction budget needs it. Install it with `apt-get install -y valgrind` "
    "(make install does so where apt-get is available), `dnf install valgrind` or `brew install valgrind`."
)


def workload() -> None:
    """The counted process: each ``os.getppid()`` closes a phase (callgrind dumps before it).

    Each counted phase starts right after a full collection, so where the collector runs inside it does not depend
    on what came before it (a change to this script, say).
    """
    gc.collect()
    os.getppid()  # closes the interpreter's start-up
    import consumer  # noqa: F401 - the phase being counted
    from persistence import DynamoDBPersistenceLayer  # noqa: F401

    os.getppid()  # closes "import"
    import libraries  # bench/libraries.py: the consumer bench/run.py measures, and its events

    from consumer.local_context import LocalContext

    handler, context = libraries.ours(), LocalContext(timeout_ms=900_000)
    warm, small, large = (
        libraries.sqs_event(n, offset) for n, offset in ((SMALL, 0), (SMALL, SMALL), (LARGE, 2 * SMALL))
    )
    handler(warm, context)  # first use: what is built lazily
    for event in (small, large):
        gc.collect()
        os.getppid()  # closes the set-up, then the collection after the small batch
        handler(event, context)
        os.getppid()  # closes the small batch, then the large one


def _environment(*, write_bytecode: bool) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "PYTHONPATH": ROOT}
    env["LC_ALL"] = "C.UTF-8"
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def count_once(python: str = sys.executable) -> dict[str, float]:
    """One counted run: the three figures, in instructions."""
    import glob
    import shutil
    import subprocess
    import tempfile

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit(INSTALL_HINT)
    command = [python, os.path.abspath(__file__), "--workload"]
    # Uncounted: compiles and writes the bytecode of everything the workload imports.
    subprocess.run(command, env=_environment(write_bytecode=True), cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "cg.out")
        counted = [valgrind, "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}", *command]
        subprocess.run(counted, env=_environment(write_bytecode=False), cwd=ROOT, check=True, capture_output=True)
        dumps = sorted(glob.glob(out + ".*"), key=lambda name: int(name.rsplit(".", 1)[1]))
        phases = [_instructions(name) for name in dumps]
    # start-up, import, set-up, small batch, collection, large batch (the exit follows, in the final dump).
    if len(phases) < 6:
        raise SystemExit(f"callgrind wrote {len(phases)} dumps, not the 6 phases: {dumps}")
    _, imported, _, small, _, large = phases[:6]
    return {"import": imported, "invocation_10_records": small, "per_record": (large - small) / (LARGE - SMALL)}


def _instructions(dump: str) -> int:
    with open(dump, encoding="utf-8") as lines:
        for line in lines:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no instruction total in {dump}")


def compare(counts: dict[str, float], budget: dict[str, float]) -> list[str]:
    """The complaints about ``counts`` against ``budget``: a growth past the tolerance, or a shrink past it."""
    complaints = []
    if budget.get("python", sys.version.split()[0]) != sys.version.split()[0]:
        complaints.append(f"the budget was counted on Python {budget['python']}, this is {sys.version.split()[0]}")
    for name in METRICS:
        change = counts[name] / budget[name] - 1
        if change > TOLERANCE:
            complaints.append(f"{name}: {counts[name]:,.0f} instructions, {change:+.1%} over the budget "
                              f"{budget[name]:,.0f} (a regression; or pay for it on purpose: make budget)")  # fmt: skip
        elif change < -TOLERANCE:
            complaints.append(f"{name}: {counts[name]:,.0f} instructions, {change:+.1%} under the budget "
                              f"{budget[name]:,.0f}: lower the budget (make budget) so the gain is kept")  # fmt: skip
    return complaints


def main(argv: list[str]) -> int:
    """Count, show, and compare with (or rewrite) the budget; non-zero when a count is off its budget."""
    import argparse
    import json
    import statistics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="counts to take; the median is compared")
    parser.add_argument("--update", action="store_true", help="rewrite the budget with the counts")
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload:
        workload()
        return 0
    runs = [count_once() for _ in range(args.repeat)]
    counts = {name: statistics.median(run[name] for run in runs) for name in METRICS}
    for name in METRICS:
        values = [run[name] for run in runs]
        spread = (max(values) - min(values)) / counts[name]
        print(f"{name:>22}: {counts[name]:>14,.0f} instructions  (runs: {', '.join(f'{v:,.0f}' for v in values)}; "
              f"spread {spread:.3%})")  # fmt: skip
    if args.update:
        budget = {
            "comment": "Instruction counts under callgrind (bench/instructions.py). A count more than 5 % over its "
            "budget fails make test, and so does one more than 5 % under it (keep the gain). Rewrite on purpose "
            "with `make budget`, in the commit that pays for a feature or keeps a gain.",
            "python": sys.version.split()[0],
            **{name: round(counts[name]) for name in METRICS},
        }
        with open(BUDGET, "w", encoding="utf-8") as file:
            file.write(json.dumps(budget, indent=2) + "\n")
        print(f"wrote {BUDGET}")
        return 0
    with open(BUDGET, encoding="utf-8") as file:
        complaints = compare(counts, json.load(file))
    for complaint in complaints:
        print(complaint, file=sys.stderr)
    return 1 if complaints else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
