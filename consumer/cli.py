"""``idempotent-consumer``: run handlers locally, and (operators) see and reset records."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumer.local_context import LocalContext
from persistence import DEFAULT_STORE_URL, STORE_URL_VARIABLE

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

INVOKE_EXAMPLES = """examples:
  idempotent-consumer invoke samples.sqs_orders:handler --event samples/events/sqs_orders.json
  idempotent-consumer invoke samples.sqs_orders:handler --event samples/events/sqs_orders.json --repeat 2
  idempotent-consumer invoke app:handler --event event.json --store dynamodb://Idempotency?endpoint_url=http://127.0.0.1:8000
"""


class CommandError(Exception):
    """A failure reported as one line with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        """Build the error."""
        super().__init__(message)
        self.code = code


def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNCTION`` (the current directory is importable)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"handler {spec!r} must look like MODULE:FUNCTION", EXIT_USAGE)
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
    """Run a handler locally with a stand-in Lambda context; print each response as one JSON line."""
    os.environ[STORE_URL_VARIABLE] = args.store
    if args.function_name:
        os.environ["AWS_LAMBDA_FUNCTION_NAME"] = args.function_name
    handler = load_handler(args.handler)
    event = _read_event(args.event)
    for attempt in range(1, args.repeat + 1):
        context = LocalContext(timeout_ms=int(args.timeout * 1000), function_name=args.function_name or "local")
        try:
            response = handler(event, context)
        except Exception as e:
            if args.debug:
                raise
            raise CommandError(f"invocation {attempt} raised {type(e).__name__}: {e}") from e
        print(json.dumps(response, default=str, ensure_ascii=False))  # noqa: T201 - the command's output
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``invoke`` (and the operator commands)."""
    parser = argparse.ArgumentParser(
        prog="idempotent-consumer", description="Run idempotent Lambda consumers locally and inspect their records."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "invoke",
        help="run a handler locally on an event file",
        epilog=INVOKE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("handler", metavar="MODULE:HANDLER")
    run.add_argument("--event", required=True, metavar="FILE", help="the event, as JSON ('-' for stdin)")
    run.add_argument("--store", default=DEFAULT_STORE_URL, metavar="URL", help=f"default {DEFAULT_STORE_URL}")
    run.add_argument("--repeat", type=_positive, default=1, metavar="N", help="invoke N times (redeliveries)")
    run.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="the stand-in function timeout")
    run.add_argument("--function-name", default=None, help="sets AWS_LAMBDA_FUNCTION_NAME (the key prefix)")
    run.set_defaults(action=invoke)
    return parser


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
        print(f"idempotent-consumer: {e}", file=sys.stderr)  # noqa: T201 - the command's output
        return e.code


if __name__ == "__main__":
    sys.exit(main())
