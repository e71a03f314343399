"""``idempotent-consumer invoke`` run as a real subprocess: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import consumer
from samples.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]

HANDLER = """
import os
from consumer import idempotent
from persistence import store_from_url

calls = []

@idempotent(store=store_from_url())
def handler(event, context):
    calls.append(1)
    left = context.get_remaining_time_in_millis() > 0
    return {"seen": event["id"], "runs_in_this_process": len(calls), "left_ms": left,
            "prefix": os.environ.get("AWS_LAMBDA_FUNCTION_NAME")}

def boom(event, context):
    raise RuntimeError("downstream is down")

def store_url(event, context):
    return os.environ.get("IDEMPOTENCY_STORE_URL")
"""


def cli(tmp_path, *args, stdin=None, env=None):
    (tmp_path / "app.py").write_text(HANDLER)
    inherited = {k: v for k, v in os.environ.items() if k != "IDEMPOTENCY_STORE_URL"}  # the test decides
    env = {**inherited, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "consumer.cli", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, input=stdin, timeout=60, check=False)  # fmt: skip


def test_invoke_prints_each_response_and_replays_across_processes(tmp_path):
    (tmp_path / "event.json").write_text(json.dumps({"id": "e-1", "detail-type": "X", "detail": {}}))
    first = cli(tmp_path, "invoke", "app:handler", "--event", "event.json", "--repeat", "2", "--function-name", "fn")
    assert first.returncode == 0, first.stderr
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert lines == [{"seen": "e-1", "runs_in_this_process": 1, "left_ms": True, "prefix": "fn"}] * 2
    again = cli(tmp_path, "invoke", "app:handler", "--event", "event.json", "--function-name", "fn")
    assert json.loads(again.stdout)["runs_in_this_process"] == 1  # replayed from the SQLite file
    assert (tmp_path / ".idempotency.sqlite3").exists()


def test_invoke_runs_the_async_sample_and_its_second_run_replays(tmp_path):
    # The sample's entry point is a sync def running asyncio.run: invoke calls it like any handler.
    ledger = Ledger(str(tmp_path / "ledger.sqlite3"))
    run = ("invoke", "samples.async_orders:handler", "--event", str(ROOT / "samples/events/async_orders.json"),
           "--store", "sqlite:///store.sqlite3")  # fmt: skip
    poison = {"batchItemFailures": [{"itemIdentifier": "b5c6d7e8-9f0a-4b1c-a2d3-e4f5a6b7c803"}]}
    first = cli(tmp_path, *run, env={"SAMPLES_LEDGER": str(ledger.path)})
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == poison
    assert "order o-2003: quantity must be positive" in first.stderr
    effects = ledger.entries("async_orders")
    assert sorted(key for key, _ in effects) == ["o-2001", "o-2002", "o-2004"]  # o-2001 came twice: ran once
    # A new process, two invocations (two event loops, one processor): everything replays, the poison fails again.
    again = cli(tmp_path, *run, "--repeat", "2", env={"SAMPLES_LEDGER": str(ledger.path)})
    assert again.returncode == 0, again.stderr
    assert [json.loads(line) for line in again.stdout.splitlines()] == [poison, poison]
    assert ledger.entries("async_orders") == effects
    # Each effect carries the idempotency key its record committed under (the poison's lock was released).
    listed = cli(tmp_path, "records", "list", "--json", "--store", "sqlite:///store.sqlite3")
    committed = {r["key"]: json.loads(r["response"])["order_id"] for r in map(json.loads, listed.stdout.splitlines())}
    assert {order: detail.split("(key ")[1].rstrip(")") for order, detail in effects} == {
        order: key for key, order in committed.items()
    }


def story_of(stderr):
    """invoke's story on stderr: {delivery: {item identifier: words}} (the library's own log lines left out)."""
    deliveries, current = {}, None
    for line in stderr.splitlines():
        if line.startswith("delivery "):
            current = deliveries.setdefault(int(line.split()[1]), {})
        elif line.startswith("  ") and current is not None and "  " in line.strip():
            item, words = line.strip().split("  ", 1)
            current[item] = words.strip()
        else:
            current = None
    return deliveries


def test_repeat_tells_what_became_of_each_record_on_each_delivery(tmp_path):
    event = json.loads((ROOT / "samples/events/sqs_orders.json").read_text())
    ids = [r["messageId"] for r in event["Records"]]  # o-1001, o-1002, o-1001 again, o-1003 (poison), o-1004
    result = cli(tmp_path, "invoke", "samples.sqs_orders:handler", "--event",
                 str(ROOT / "samples/events/sqs_orders.json"), "--repeat", "2", "--store", "sqlite:///store.sqlite3",
                 env={"SAMPLES_LEDGER": str(tmp_path / "ledger.sqlite3")})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2  # one response per delivery, as JSON lines
    poison = "failed: ValueError: order o-1003: amount must be positive, got -5.0"
    ran, replayed = "ran and committed", "replayed: completed before, the handler did not run"
    assert story_of(result.stderr) == {
        1: dict(zip(ids, [ran, ran, replayed, poison, ran], strict=True)),
        2: dict(zip(ids, [replayed, replayed, replayed, poison, replayed], strict=True)),
    }


APP_WITH_A_BATCH = """
from consumer import BatchProcessor, EventType, process_partial_response
from persistence import store_from_url

processor = BatchProcessor(EventType.SQS, store=store_from_url())

def handler(event, context):
    return process_partial_response(event, lambda record: record.body, processor, context)
"""


def test_a_batch_that_fails_whole_is_shown_on_every_delivery_and_the_repeat_goes_on(tmp_path):
    # Every record is deferred (0.5 s left, under the 1 s deadline margin): the whole batch fails and the processor
    # raises BatchProcessingError, as it does on Lambda, where the invocation fails and every record comes back.
    (tmp_path / "batch_app.py").write_text(APP_WITH_A_BATCH)
    records = [{"messageId": f"m-{i}", "body": str(i), "attributes": {}, "eventSource": "aws:sqs"} for i in (1, 2)]
    (tmp_path / "event.json").write_text(json.dumps({"Records": records}))
    result = cli(tmp_path, "invoke", "batch_app:handler", "--event", "event.json", "--repeat", "2", "--timeout", "0.5")
    assert result.returncode == 1
    assert result.stdout == ""  # no response: each invocation raised
    deferred = "deferred: too little time was left before the Lambda deadline"
    assert story_of(result.stderr) == {n: {"m-1": deferred, "m-2": deferred} for n in (1, 2)}
    raised = [line for line in result.stderr.splitlines() if line.startswith("idempotent-consumer: ")]
    assert [line.split(" raised ")[0] for line in raised] == ["idempotent-consumer: invocation 1",
                                                              "idempotent-consumer: invocation 2"]  # fmt: skip
    assert all("BatchProcessingError: All records failed processing. 2 records" in line for line in raised), raised
    assert all(line.endswith("Lambda counts the invocation failed and delivers the whole event again, every "
                             "record of it") for line in raised)  # fmt: skip
    assert "Outcome." not in result.stderr


def test_event_from_stdin_and_memory_store(tmp_path):
    result = cli(tmp_path, "invoke", "app:handler", "--event", "-", "--store", "memory://", stdin='{"id": "e-2"}')
    assert json.loads(result.stdout)["seen"] == "e-2"
    assert not (tmp_path / ".idempotency.sqlite3").exists()


def test_handler_failure_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "event.json").write_text("{}")
    result = cli(tmp_path, "invoke", "app:boom", "--event", "event.json")
    assert result.returncode == 1
    assert result.stderr == (
        "idempotent-consumer: invocation 1 raised RuntimeError: downstream is down; Lambda counts the invocation"
        " failed and delivers the whole event again, every record of it\n"
    )


def test_debug_shows_the_traceback(tmp_path):
    (tmp_path / "event.json").write_text("{}")
    result = cli(tmp_path, "--debug", "invoke", "app:boom", "--event", "event.json")
    assert result.returncode == 1
    assert "Traceback" in result.stderr


def test_missing_handler_or_event_exit_1(tmp_path):
    (tmp_path / "event.json").write_text("{}")
    missing = cli(tmp_path, "invoke", "app:nothing", "--event", "event.json")
    assert missing.returncode == 1
    assert "cannot load handler 'app:nothing'" in missing.stderr
    no_file = cli(tmp_path, "invoke", "app:handler", "--event", "absent.json")
    assert no_file.returncode == 1
    assert "cannot read event 'absent.json'" in no_file.stderr
    (tmp_path / "bad.json").write_text("{nope")
    assert "is not JSON" in cli(tmp_path, "invoke", "app:handler", "--event", "bad.json").stderr


def test_usage_errors_exit_2(tmp_path):
    assert cli(tmp_path, "invoke", "app:handler").returncode == 2  # no --event
    assert cli(tmp_path, "invoke", "app:handler", "--event", "e.json", "--repeat", "0").returncode == 2
    bad_spec = cli(tmp_path, "invoke", "no-colon", "--event", "e.json")
    assert bad_spec.returncode == 2
    assert "must look like MODULE:FUNCTION" in bad_spec.stderr


def test_help_has_examples(tmp_path):
    result = cli(tmp_path, "invoke", "--help")
    assert result.returncode == 0
    assert "examples:" in result.stdout


def test_invoke_uses_the_store_url_variable_when_no_store_is_given(tmp_path):
    (tmp_path / "event.json").write_text(json.dumps({"id": "e-3"}))
    env = {"IDEMPOTENCY_STORE_URL": "sqlite:///from-env.sqlite3"}
    seen = cli(tmp_path, "invoke", "app:store_url", "--event", "event.json", env=env)
    assert (seen.returncode, json.loads(seen.stdout)) == (0, "sqlite:///from-env.sqlite3"), seen.stderr
    first = cli(tmp_path, "invoke", "app:handler", "--event", "event.json", env=env)
    assert first.returncode == 0, first.stderr
    again = cli(tmp_path, "invoke", "app:handler", "--event", "event.json", env=env)
    assert json.loads(again.stdout) == json.loads(first.stdout)  # replayed from that file in a new process
    assert (tmp_path / "from-env.sqlite3").exists()
    assert not (tmp_path / ".idempotency.sqlite3").exists()


def test_store_option_wins_over_the_variable_which_wins_over_the_default(tmp_path):
    (tmp_path / "event.json").write_text("{}")
    variable = {"IDEMPOTENCY_STORE_URL": "sqlite:///from-env.sqlite3"}
    option = cli(tmp_path, "invoke", "app:store_url", "--event", "event.json", "--store", "memory://", env=variable)
    assert json.loads(option.stdout) == "memory://", option.stderr
    neither = cli(tmp_path, "invoke", "app:store_url", "--event", "event.json")
    assert json.loads(neither.stdout) == "sqlite:///.idempotency.sqlite3", neither.stderr
    empty = cli(tmp_path, "invoke", "app:store_url", "--event", "event.json", env={"IDEMPOTENCY_STORE_URL": ""})
    assert json.loads(empty.stdout) == "sqlite:///.idempotency.sqlite3", empty.stderr  # empty counts as unset


def test_help_states_the_store_precedence(tmp_path):
    text = " ".join(cli(tmp_path, "invoke", "--help").stdout.split())
    assert "--store if given, else $IDEMPOTENCY_STORE_URL as the environment has it, else sqlite:///" in text
    assert "this option, else $IDEMPOTENCY_STORE_URL, else sqlite:///.idempotency.sqlite3" in text


def test_version_prints_the_package_version(tmp_path):
    result = cli(tmp_path, "--version")
    assert (result.returncode, result.stdout) == (0, f"idempotent-consumer {consumer.__version__}\n")


def test_help_examples_name_only_the_users_own_files(tmp_path):
    # Run as written by tests/integration/test_package.py; here: nothing from this repository is named.
    for command in (["invoke"], ["key"], ["records", "list"], ["table", "create"]):
        examples = cli(tmp_path, *command, "--help").stdout.split("examples:", 1)[1]
        assert "samples" not in examples, command
        assert "idempotent-consumer " in examples, command


@pytest.mark.parametrize(
    ("argv", "debug"),
    [
        (["records", "list"], False),
        (["--debug", "records", "list"], True),
        (["records", "list", "--debug"], True),  # after the command, as the README's "--debug for a traceback" reads
        (["key", "--event", "e.json", "--debug"], True),
        (["invoke", "m:h", "--event", "e.json", "--debug"], True),
    ],
)
def test_debug_is_taken_before_or_after_the_command(argv, debug):
    from consumer.cli import build_parser  # noqa: PLC0415 - this test's alone

    assert build_parser().parse_args(argv).debug is debug


def test_every_option_and_argument_of_every_command_has_help_text():
    import argparse  # noqa: PLC0415 - this test's alone

    from consumer.cli import build_parser  # noqa: PLC0415 - this test's alone

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*path, name])
            elif not isinstance(action, argparse._HelpAction):
                yield " ".join(path), action

    walked = list(walk(build_parser(), ["idempotent-consumer"]))
    assert len(walked) >= 25
    silent = [f"{path} {action.option_strings or action.dest}" for path, action in walked
              if not action.help or action.help == argparse.SUPPRESS]  # fmt: skip
    assert silent == []


HOSTILE_APP = """
from consumer import BatchProcessor, EventType, process_partial_response
from persistence import store_from_url

processor = BatchProcessor(EventType.SQS, store=store_from_url())

def fail(record):
    raise ValueError(record.body)

def handler(event, context):
    return process_partial_response(event, fail, processor, context)
"""


def test_the_story_keeps_a_producers_line_breaks_on_their_line(tmp_path):
    # What a record's error quotes is a producer's: a line break in it must not start a forged line of the story.
    (tmp_path / "hostile_app.py").write_text(HOSTILE_APP)
    forged = "bad\n  m-2  ran and committed\n[INFO] batch processed"
    records = [{"messageId": "m-1", "body": forged, "attributes": {}, "eventSource": "aws:sqs"}]
    (tmp_path / "event.json").write_text(json.dumps({"Records": records}))
    result = cli(tmp_path, "invoke", "hostile_app:handler", "--event", "event.json", "--store", "memory://")
    assert result.returncode == 1
    assert story_of(result.stderr) == {1: {"m-1": "failed: ValueError: bad\\u000a  m-2  ran and committed\\u000a"
                                               "[INFO] batch processed"}}  # fmt: skip
    # (The library's own log line carries the traceback, whose last lines are the exception's text, as Python
    # prints it: that text is not a line of the story.)
