"""``idempotent-consumer``: run handlers locally, and (operators) see and reset records.

The cli wing owns the command (this module; ``python -m consumer.cli`` runs it too), ``key`` (``_key``) and
``records`` (``_records``), and ``invoke``'s story of each delivery (``_story``). It may import the core,
``persistence``, the sources wing (a Kafka event's keys), the batch wing (the processors a handler used) and the
observability wing (what became of each record).
Nothing imports it: the ``idempotent-consumer`` script's entry point is ``consumer.cli:main``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    from consumer import __version__
except ImportError as e:  # the consumer/__init__.py found is not ours: another distribution's, installed over it
    from consumer._shadowing import clobbered_message

    raise SystemExit(f"idempotent-consumer: {clobbered_message()}") from e
from consumer._reports import one_line
from consumer._shadowing import shadowing_in
from consumer.cli import _records as ops
from consumer.cli._key import key_command
from consumer.cli._records import CommandError, out, store_url
from consumer.cli._story import LAMBDA_RETRIES, Batches, story
from consumer.local_context import LocalContext
from persistence import DEFAULT_STORE_URL, STORE_URL_VARIABLE, IdempotencyError, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Every example below runs as written from any directory (tests/integration/test_package.py runs each one in a
# fresh virtual environment with the built wheel): the files they name are the user's own (app.py defining
# `handler`, event.json), the keys are what `records list` shows, and URLs are quoted for the shell.
KEY_HELP = "the record's key, as records list shows it (PREFIX#HASH)"
STORE_HELP = f"store URL: this option, else ${STORE_URL_VARIABLE}, else {DEFAULT_STORE_URL} (in the current directory)"
RECORDS_DESCRIPTION = f"""See and reset idempotency records.

The store is --store, else ${STORE_URL_VARIABLE}, else {DEFAULT_STORE_URL}. A SQLite store
that does not exist is an error: these commands never create one.
"""
RECORDS_EXAMPLES = """examples:
  # KEY as records list shows it
  idempotent-consumer records list
  idempotent-consumer records list --status IN_PROGRESS --store sqlite:///.idempotency.sqlite3
  idempotent-consumer records list --json --store 'dynamodb://Idempotency?region=eu-west-1'
  idempotent-consumer records show 'orders#9f86d08...'
  idempotent-consumer records delete 'orders#9f86d08...' --yes
  idempotent-consumer records delete 'orders#9f86d08...' --yes --force   # even a live lock
  idempotent-consumer records stuck --json
"""
DELETE_DESCRIPTION = """Delete one record so that its record runs again on its next delivery.

A live IN_PROGRESS lock (its holder may still be running) is refused unless --force is given:
deleting it lets a duplicate run beside the holder. A lock past its deadline (its holder crashed)
and a COMPLETE record are deleted without --force. Only the record read is deleted: if it changed
meanwhile (its holder committed it while you were asked, or another invocation acquired it), nothing
is deleted and the command exits 1.
"""
KEY_EXAMPLES = """examples:
  # event.json: an event as Lambda delivers it
  idempotent-consumer key --event event.json
  idempotent-consumer key --event event.json --jmespath 'powertools_json(body).order_id' --prefix orders
  idempotent-consumer key --event event.json --header Idempotency-Key
exit status: 1 when a record gets no key (it would fail), 2 for options that make no config
"""
TABLE_EXAMPLES = """examples:
  idempotent-consumer table create --table IdempotencyTable --region eu-west-1
  idempotent-consumer table create --table Idempotency --endpoint-url http://127.0.0.1:8000 --region us-east-1
"""
INVOKE_DESCRIPTION = f"""Run a handler locally with a stand-in Lambda context; print each response as one JSON line.

On stderr, for each delivery, what became of each record of the batch it processed: ran and committed,
replayed, failed (why), skipped or deferred. A delivery that raises is one line (Lambda delivers the whole
event again) and the next one still runs; the command then exits 1.

The handler gets its store URL in ${STORE_URL_VARIABLE} (persistence.store_from_url() reads it):
--store if given, else ${STORE_URL_VARIABLE} as the environment has it, else {DEFAULT_STORE_URL}.
"""
INVOKE_EXAMPLES = f"""examples:
  # app.py in the current directory defines handler; event.json holds an event
  idempotent-consumer invoke app:handler --event event.json
  idempotent-consumer invoke app:handler --event event.json --repeat 2 --function-name orders
  idempotent-consumer invoke app:handler --event - --store memory:// < event.json
  {STORE_URL_VARIABLE}=sqlite:///orders.sqlite3 idempotent-consumer invoke app:handler --event event.json
  idempotent-consumer invoke app:handler --event event.json \\
      --store 'dynamodb://Idempotency?endpoint_url=http://127.0.0.1:8000&region=us-east-1'
"""


def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNCTION`` (the current directory is importable, unless a file of it shadows our packages)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"handler {spec!r} must look like MODULE:FUNCTION", EXIT_USAGE)
    # Here `consumer` and `persistence` are already imported (ours), so a user's consumer.py would go unnoticed
    # until Lambda, where the function's directory comes first on sys.path as it does below.
    shadowed = shadowing_in(Path.cwd())
    if shadowed is not None:
        raise CommandError(f"cannot load handler {spec!r}: {shadowed}")
    sys.path.insert(0, str(Path.cwd()))
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        raise CommandError(f"cannot load handler {spec!r}: {e}") from e
    if not callable(handler):
        raise CommandError(f"handler {spec!r} is not callable")
    return handler  # type: ignore[no-any-return]


def _read_event(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        return json.loads(text)
    except OSError as e:
        raise CommandError(f"cannot read event {path!r}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise CommandError(f"event {path!r} is not JSON: {e}") from e


def invoke(args: argparse.Namespace) -> int:
    """Run a handler locally with a stand-in Lambda context, ``--repeat`` times, telling what each delivery did.

    Each response is one JSON line on stdout. On stderr, for each batch the handler processed, each record's
    fate: ran, replayed, failed (why), skipped or deferred. A delivery that raises (a batch whose every record
    failed raises ``BatchProcessingError``) is one line naming what Lambda would do, and the next one still runs,
    as Lambda's would: the command then exits 1.

    The handler's store URL (``$IDEMPOTENCY_STORE_URL``, which ``store_from_url()`` reads) is ``--store``,
    else the variable as the environment has it, else the SQLite file in the current directory.
    """
    os.environ[STORE_URL_VARIABLE] = store_url(args.store)
    if args.function_name:
        os.environ["AWS_LAMBDA_FUNCTION_NAME"] = args.function_name
    handler = load_handler(args.handler)
    event = _read_event(args.event)
    batches, raised = Batches(), 0
    for attempt in range(1, args.repeat + 1):
        context = LocalContext(timeout_ms=int(args.timeout * 1000), function_name=args.function_name or "local")
        error: Exception | None = None
        try:
            response = handler(event, context)
        except Exception as e:
            if args.debug:
                raise
            error = e
        for line in story(attempt, args.repeat, batches.processed()):
            _say(line)
        if error is not None:
            raised += 1
            _say(f"idempotent-consumer: invocation {attempt} raised {type(error).__name__}: {error}; {LAMBDA_RETRIES}")
            continue
        out(json.dumps(response, default=str, ensure_ascii=False))
        sys.stdout.flush()
    return EXIT_OK if not raised else EXIT_FAILED


def _say(line: str) -> None:
    """One line of the story, on stderr beside the library's own log lines (stdout holds the responses)."""
    sys.stdout.flush()
    print(one_line(line), file=sys.stderr, flush=True)  # noqa: T201 - the command's output (it quotes errors' text)


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``invoke`` (and the operator commands)."""
    parser = argparse.ArgumentParser(
        prog="idempotent-consumer", description="Run idempotent Lambda consumers locally and inspect their records."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = _subparser(commands, "invoke", "run a handler locally on an event file", INVOKE_EXAMPLES,
                     description=INVOKE_DESCRIPTION)  # fmt: skip
    run.add_argument(
        "handler", metavar="MODULE:HANDLER", help="the handler to run, as Lambda's Handler names it (app:handler)"
    )
    run.add_argument("--event", required=True, metavar="FILE", help="the event, as JSON ('-' for stdin)")
    run.add_argument("--store", default=None, metavar="URL", help=f"the handler's {STORE_HELP}")
    run.add_argument("--repeat", type=_positive, default=1, metavar="N", help="invoke N times (redeliveries)")
    run.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="the stand-in function timeout")
    run.add_argument("--function-name", default=None, help="sets AWS_LAMBDA_FUNCTION_NAME (the key prefix)")
    run.set_defaults(action=invoke)
    _add_records(commands)
    _add_key(commands)
    _add_table(commands)
    return parser


def _subparser(commands: Any, name: str, help_text: str, examples: str, **kwargs: Any) -> argparse.ArgumentParser:
    # Every command takes --debug too (idempotent-consumer records list --debug), as the top level does.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    parents = [*kwargs.pop("parents", []), debug]
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help_text,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=parents,
        **kwargs,
    )
    return parser


def _add_records(commands: Any) -> None:
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", default=None, metavar="URL", help=STORE_HELP)
    listing = argparse.ArgumentParser(add_help=False)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    records = _subparser(commands, "records", "see and reset idempotency records", RECORDS_EXAMPLES,
                         description=RECORDS_DESCRIPTION)  # fmt: skip
    actions = records.add_subparsers(dest="records_command", required=True)
    show_list = _subparser(actions, "list", "list records", RECORDS_EXAMPLES, parents=[store, listing])
    show_list.add_argument("--status", choices=[s.value for s in RecordStatus], help="EXPIRED is derived from time")
    show_list.add_argument("--limit", type=_positive, default=None, metavar="N", help="show at most N records")
    show_list.set_defaults(action=ops.records_list)
    show = _subparser(actions, "show", "the whole record, response pretty-printed", RECORDS_EXAMPLES, parents=[store])
    show.add_argument("key", metavar="KEY", help=KEY_HELP)
    show.set_defaults(action=ops.records_show)
    delete = _subparser(actions, "delete", "let one record run again", RECORDS_EXAMPLES, parents=[store],
                        description=DELETE_DESCRIPTION)  # fmt: skip
    delete.add_argument("key", metavar="KEY", help=KEY_HELP)
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    delete.add_argument("--force", action="store_true",
                        help="delete even a live IN_PROGRESS lock (a duplicate may run beside its holder)")  # fmt: skip
    delete.set_defaults(action=ops.records_delete)
    stuck = _subparser(actions, "stuck", "IN_PROGRESS records past their lock deadline", RECORDS_EXAMPLES,
                       parents=[store, listing])  # fmt: skip
    stuck.set_defaults(action=ops.records_stuck)


def _add_key(commands: Any) -> None:
    key = _subparser(commands, "key", "show the key each record of an event gets", KEY_EXAMPLES)
    key.add_argument("--event", required=True, metavar="FILE", help="the event, as JSON ('-' for stdin)")
    key.add_argument("--jmespath", default=None, metavar="EXPR", help="event_key_jmespath (default: the record's id)")
    key.add_argument("--event-type", choices=["sqs", "kinesis", "dynamodb", "kafka", "eventbridge"], default=None,
                     help="default: detected from the event")  # fmt: skip
    key.add_argument(
        "--header",
        default=None,
        metavar="NAME",
        help="key_header: a producer's key (Kafka header, SQS attribute, EventBridge detail field)",
    )
    key.add_argument(
        "--prefix", default=None, metavar="P", help="key_prefix (default $AWS_LAMBDA_FUNCTION_NAME or local)"
    )
    key.add_argument(
        "--raise-on-no-idempotency-key",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="raise_on_no_idempotency_key: a record without a key fails, and the command exits 1 (the default)",
    )
    key.set_defaults(action=lambda args: key_command(args, _read_event(args.event)))


def _add_table(commands: Any) -> None:
    table = _subparser(commands, "table", "manage the DynamoDB idempotency table", TABLE_EXAMPLES)
    actions = table.add_subparsers(dest="table_command", required=True)
    create = _subparser(actions, "create", "create the table with TTL enabled (exists already: fine)", TABLE_EXAMPLES)
    create.add_argument("--table", required=True, metavar="NAME", help="the table's name")
    create.add_argument("--endpoint-url", default=None, metavar="URL",
                        help="a DynamoDB endpoint other than AWS's (DynamoDB Local)")  # fmt: skip
    create.add_argument(
        "--region", default=None, help="the AWS region (default: $AWS_REGION, else ~/.aws/config, as boto3 reads them)"
    )
    create.add_argument("--sort-key", action="store_true", help="composite key: id (partition) + sort_key")
    create.set_defaults(action=ops.table_create)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        msg = f"must be at least 1, got {value}"
        raise argparse.ArgumentTypeError(msg)
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``idempotent-consumer``; returns the exit code (0 ok, 1 failed or not found, 2 usage)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.action(args))
    except CommandError as e:
        if args.debug and e.__cause__ is not None:
            raise
        return _fail(str(e), e.code)
    except BrokenPipeError:  # the reader (head, less) went away: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (IdempotencyError, OSError, Exception) as e:
        if args.debug:
            raise
        return _fail(f"{type(e).__name__}: {e}", EXIT_FAILED)


def _fail(message: str, code: int) -> int:
    print(f"idempotent-consumer: {one_line(message)}", file=sys.stderr)  # noqa: T201 - the command's output
    return code
