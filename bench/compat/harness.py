"""What the documented-example scenarios share: the registry, a Lambda context, loading an example, what is observed.

A scenario (:mod:`idempotency_examples`, :mod:`batch_examples`) is registered under ``page/example`` with
:func:`scenario`; it loads the example from the checkout as Powertools publishes it (:meth:`Harness.load`), runs it
as its page describes, and returns what it did. An error is observed by its class and every class it is
(:func:`error`), so an error here counts as alike when it is, or derives from, the one Powertools raised.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import standins

if TYPE_CHECKING:
    from collections.abc import Callable

    Scenario = Callable[["Harness"], dict[str, Any]]

HERE = Path(__file__).resolve().parent
#: Where the examples are, in a checkout of Powertools' repository: one folder per documentation page.
FOLDERS = {"idempotency": ("examples/idempotency/src", "examples/idempotency/tests"),
           "batch": ("examples/batch_processing/src",)}  # fmt: skip
PT_REPO = Path()  # set by examples.main()

SCENARIOS: dict[str, Scenario] = {}


def scenario(page: str, *stems: str) -> Callable[[Scenario], Scenario]:
    """Register a scenario for the examples ``stems`` of ``page`` (named ``page/stem``)."""

    def register(function: Scenario) -> Scenario:
        for stem in stems:
            SCENARIOS[f"{page}/{stem}"] = function
        return function

    return register


class Context:
    """A Lambda context with a fixed 30 s left."""

    function_name = "compat"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:compat"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class Harness:
    """What a scenario needs: load an example (with its own table), events, contexts, the table's items."""

    def __init__(self, library: str, endpoint: str, name: str) -> None:
        self.library, self.endpoint = library, endpoint
        self.page, _, self.name = name.partition("/")
        import boto3

        self.client = boto3.client("dynamodb", endpoint_url=endpoint)
        self.table = ""

    def create_table(self, key: str = "id", sort_key: str | None = None) -> str:
        name = f"compat-{uuid.uuid4().hex[:12]}"
        schema = [{"AttributeName": key, "KeyType": "HASH"}]
        attributes = [{"AttributeName": key, "AttributeType": "S"}]
        if sort_key is not None:
            schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
            attributes.append({"AttributeName": sort_key, "AttributeType": "S"})
        self.client.create_table(
            TableName=name, KeySchema=schema, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST"
        )
        return name

    def source(self, example: str) -> Path:
        """The example's file in the checkout (``FileNotFoundError`` when this checkout has none of that name)."""
        for folder in FOLDERS[self.page]:
            path = PT_REPO / folder / f"{example}.py"
            if path.is_file():
                return path
        msg = f"{example}.py is not in {', '.join(FOLDERS[self.page])} of {PT_REPO}"
        raise FileNotFoundError(msg)

    def load(self, example: str, *, table: str | None = None, module: str | None = None) -> types.ModuleType:
        """Import the example as Powertools publishes it, under its own name, with ``IDEMPOTENCY_TABLE`` set."""
        self.table = table if table is not None else self.create_table()
        os.environ["IDEMPOTENCY_TABLE"] = self.table
        path = self.source(example)
        loaded = types.ModuleType(module or example)
        loaded.__file__ = str(path)
        sys.modules[loaded.__name__] = loaded
        # dont_inherit: this module's `from __future__ import annotations` must not turn the example's into text.
        code = compile(path.read_text(), str(path), "exec", dont_inherit=True)
        exec(code, loaded.__dict__)  # noqa: S102 - the example measured
        return loaded

    @staticmethod
    def event(name: str) -> Any:
        return json.loads((HERE / "events" / name).read_text())

    @staticmethod
    def context() -> Context:
        return Context()

    def items(self) -> list[dict[str, Any]]:
        return self.client.scan(TableName=self.table)["Items"]

    @staticmethod
    def count_requests(store: Any) -> list[str]:
        sent: list[str] = []
        store.client.meta.events.register("before-send.dynamodb.*", lambda **_: sent.append("request"))
        return sent

    def run_test(self, app: str, test: str, function: str, **fixtures: Any) -> dict[str, Any]:
        """Run a documented pytest test: its app module under its own name, its fixtures called directly."""
        self.load(app, table="IdempotencyTable")
        module = self.load(test, table="IdempotencyTable")
        monkeypatch = standins.MonkeyPatch(os.environ)
        arguments = {"lambda_context": module.lambda_context(), "monkeypatch": monkeypatch, **fixtures}
        target = getattr(module, function)
        names = target.__code__.co_varnames[: target.__code__.co_argcount]
        try:
            target(**{name: arguments[name] if name in arguments else getattr(module, name)() for name in names})
        finally:
            monkeypatch.undo()
        return {"passed": True}


#: The messages of the errors observed in the current example (for the reader: only the type is compared).
DETAILS: list[str] = []


def error(exc: BaseException) -> dict[str, Any]:
    """What an error is observed as: its type's name, and every class it is (``except`` clauses that catch it)."""
    DETAILS.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
    return {"error": type(exc).__name__, "kinds": [kind.__name__ for kind in type(exc).__mro__[:-3]]}


def attempt(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - what the example raised is what is observed
        return error(exc)
