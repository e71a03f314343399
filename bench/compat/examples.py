"""Runs Powertools' documented examples, from a checkout of its repository, and writes what each did as JSON.

``python examples.py --pt-repo DIR --library powertools|ours --endpoint URL --output FILE`` loads each example of
``DIR/examples/`` (the idempotency page's, its testing examples included, and the batch page's) as Powertools
publishes it, runs it against DynamoDB Local as its page describes (the scenarios of :mod:`idempotency_examples` and
:mod:`batch_examples`: which events, how often), and records what it did: its responses, what replayed, what it
logged, the records it left.
``--library powertools`` runs it on Powertools; ``--library ours`` runs it with the name-only shim installed
(:mod:`shim`): Powertools' idempotency and batch names answer with ours, nothing else changes. Both runs use the
same stand-ins (:mod:`standins`) for what is not measured. What is written for each example is
``{"observed": {...}, "detail": "..."}``: ``observed`` is what is compared, ``detail`` the message of an error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import batch_examples  # noqa: F401 - registers its scenarios
import harness
import idempotency_examples  # noqa: F401 - registers its scenarios
import shim
import standins
from harness import DETAILS, SCENARIOS, Harness, error


def run_one(library: str, endpoint: str, name: str) -> dict[str, Any]:
    standins.LOGGED.clear()
    standins.SENT.clear()
    DETAILS.clear()
    for variable in ("POWERTOOLS_IDEMPOTENCY_DISABLED", "IDEMPOTENCY_DISABLED", "AWS_LAMBDA_FUNCTION_NAME"):
        os.environ.pop(variable, None)
    try:
        observed = SCENARIOS[name](Harness(library, endpoint, name))
    except Exception as exc:  # noqa: BLE001 - what the example raised is what is observed
        observed = error(exc)
    return {"observed": observed, "detail": " | ".join(DETAILS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pt-repo", required=True, type=Path, help="a checkout of powertools-lambda-python")
    parser.add_argument("--library", choices=["ours", "powertools"], required=True)
    parser.add_argument("--endpoint", required=True, help="DynamoDB Local's URL")
    parser.add_argument("--output", required=True, help="where the JSON goes (examples print to stdout)")
    parser.add_argument("--only", nargs="*", help="some examples only (page/name)")
    args = parser.parse_args()
    harness.PT_REPO = args.pt_repo.resolve()
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = args.endpoint
    standins.install()
    if args.library == "ours":
        shim.install()
    results = {name: run_one(args.library, args.endpoint, name) for name in args.only or sorted(SCENARIOS)}
    Path(args.output).write_text(json.dumps(results, sort_keys=True, default=repr))


if __name__ == "__main__":
    main()
