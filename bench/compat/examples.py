"""Runs Powertools' documented examples, from a checkout of its repository, and writes what each did as JSON.

``python examples.py --pt-repo DIR --library powertools|ours --endpoint URL --output FILE`` loads each example of
``DIR/examples/`` (the idempotency page's, its testing examples included, and the batch page's getting-started
ones) as Powertools publishes it, runs it against DynamoDB Local as its page describes (the scenarios below: which
events, how often), and records what it did: its responses, what replayed, what it logged, the records it left.
``--library powertools`` runs it on Powertools; ``--library ours`` runs it with the name-only shim installed
(:mod:`shim`): Powertools' idempotency and batch names answer with ours, nothing else changes. Both runs use the
same stand-ins (:mod:`standins`) for what is not measured. What is written for each example is
``{"observed": {...}, "detail": "..."}``: ``observed`` is what is compared, ``detail`` the message of an error.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import sys
import tempfile
import time
import traceback
import types
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import shim  # noqa: E402 - after the path that holds it
import standins  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

    Scenario = Callable[["Harness"], dict[str, Any]]

#: Where the examples are, in a checkout of Powertools' repository: one folder per documentation page.
FOLDERS = {"idempotency": ("examples/idempotency/src", "examples/idempotency/tests"),
           "batch": ("examples/batch_processing/src",)}  # fmt: skip
PT_REPO = Path()  # set by main()

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
        exec(compile(path.read_text(), str(path), "exec"), loaded.__dict__)  # noqa: S102 - the example measured
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


# -- the idempotency examples ------------------------------------------------------------------------------------


@scenario("idempotency", "getting_started_with_idempotency")
def getting_started(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    first = m.lambda_handler(h.event("payment.json"), h.context())
    again = m.lambda_handler(h.event("payment.json"), h.context())
    other = m.lambda_handler({"user_id": "u-43", "product_id": "p-1001"}, h.context())
    return {
        "first": {k: v for k, v in first.items() if k != "payment_id"},
        "duplicate_replays_the_first_payment": again == first,
        "another_event_is_a_new_payment": other["payment_id"] != first["payment_id"],
        "records": len(h.items()),
    }


@scenario("idempotency", "working_with_idempotent_function_dataclass", "working_with_idempotent_function_pydantic")
def idempotent_function_argument(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    handled = [m.lambda_handler({}, h.context()) for _ in range(2)]
    direct = m.process_order(order=m.Order(item=m.OrderItem(sku="fake", description="sample"), order_id=1))
    other = m.process_order(order=m.Order(item=m.OrderItem(sku="fake", description="sample"), order_id=2))
    return {"handler": handled, "direct": [direct, other], "records": len(h.items())}


@scenario("idempotency", "integrate_idempotency_with_batch_processor")
def batch_pattern(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    event = h.event("sqs_single.json")
    two = copy.deepcopy(event)
    two["Records"].append({**event["Records"][0], "messageId": "6d3c3a4e-8f5b-4b8e-9a51-1f2f2a7c0002"})
    responses = [m.lambda_handler(event, h.context()), m.lambda_handler(two, h.context())]
    return {"responses": responses, "records": len(h.items())}


@scenario("idempotency", "working_with_payload_subset")
def payload_subset(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    event = h.event("api_gateway_payment.json")
    first = m.lambda_handler(event, h.context())
    resent = {**event, "requestContext": {**event["requestContext"], "requestId": "req-resent"}}
    again = m.lambda_handler(resent, h.context())
    other = m.lambda_handler({**event, "body": json.dumps({"user_id": "u-42", "product_id": "p-2"})}, h.context())
    return {
        "status": first["statusCode"],
        "same_subset_replays": again == first,
        "other_product_is_new": other["payment_id"] != first["payment_id"],
        "records": len(h.items()),
    }


@scenario("idempotency", "working_with_lambda_timeout")
def lambda_timeout(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    return {"result": attempt(lambda: m.lambda_handler(h.event("sqs_single.json")["Records"][0], h.context()))}


@scenario("idempotency", "working_with_exceptions")
def exceptions(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    event = {"postId": 1, "body": "a comment"}
    outcomes = [attempt(lambda: m.lambda_handler(event, h.context())) for _ in range(2)]
    posts = len(standins.SENT)
    # The store cannot be reached (no such table): caught by its Powertools name. A module of another name, as a
    # second live function of one name is refused.
    down = h.load(h.name, table="no-such-table", module=f"{h.name}_store_down")
    return {"outcomes": outcomes, "posts": posts, "store_down": attempt(lambda: down.lambda_handler(event, None))}


@scenario("idempotency", "customize_persistence_layer")
def custom_attributes(h: Harness) -> dict[str, Any]:
    m = h.load(h.name, table=h.create_table(key="idempotency_key"))
    event = {"order": "o-1"}
    responses = [m.lambda_handler(event, h.context()) for _ in range(2)]
    (item,) = h.items()
    named = {"idempotency_key", "expires_at", "current_status", "result_data"}
    return {"responses": responses, "attributes": sorted(name for name in item if name in named)}


@scenario("idempotency", "working_with_local_cache")
def local_cache(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    event = h.event("body_payment.json")
    sent = h.count_requests(m.persistence_layer)
    first = m.lambda_handler(event, h.context())
    on_first = len(sent)
    again = m.lambda_handler(copy.deepcopy(event), h.context())
    return {"same": first == again == event, "requests": [on_first, len(sent) - on_first]}


@scenario("idempotency", "working_with_record_expiration")
def record_expiration(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    m.lambda_handler(h.event("body_payment.json"), h.context())
    (item,) = h.items()
    return {"expires_in_hours": round((int(item["expiration"]["N"]) - time.time()) / 3600)}


@scenario("idempotency", "working_with_validation_payload")
def validation(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    first = m.lambda_handler(h.event("charge_500.json"), h.context())
    again = m.lambda_handler(h.event("charge_500.json"), h.context())
    tampered = attempt(lambda: m.lambda_handler(h.event("charge_10.json"), h.context()))
    return {"first": first["statusCode"], "again_replays": again == first, "tampered": tampered}


@scenario("idempotency", "working_with_idempotency_key_required")
def key_required(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    with_key = m.lambda_handler(h.event("order_with_key.json"), h.context()) == h.event("order_with_key.json")
    return {
        "with_key": with_key,
        "without_key": attempt(lambda: m.lambda_handler(h.event("order_without_key.json"), None)),
    }


@scenario("idempotency", "working_with_custom_session", "working_with_custom_config")
def custom_client(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    event = h.event("body_payment.json")
    responses = [m.lambda_handler(copy.deepcopy(event), h.context()) for _ in range(2)]
    return {"replayed": responses == [event, event], "records": len(h.items())}


@scenario("idempotency", "working_with_composite_key")
def composite_key(h: Harness) -> dict[str, Any]:
    m = h.load(h.name, table=h.create_table(key="id", sort_key="sort_key"))
    result = attempt(lambda: m.lambda_handler(h.event("body_payment.json"), h.context()))
    return {"result": result, "records": len(h.items())}


@scenario("idempotency", "bring_your_own_persistent_store")
def own_store(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)  # the page shows the class only
    return {"defines": sorted(n for n, v in vars(m).items() if isinstance(v, type) and v.__module__ == h.name)}


@scenario("idempotency", "integrate_idempotency_with_validator")
def with_validator(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    responses = [m.lambda_handler(h.event("api_gateway_message.json"), h.context()) for _ in range(2)]
    return {"responses": responses, "records": len(h.items())}


@scenario("idempotency", "test_disabling_idempotency_utility")
def disabled(h: Harness) -> dict[str, Any]:
    return h.run_test("app_test_disabling_idempotency_utility", h.name, "test_idempotent_lambda_handler")


@scenario("idempotency", "test_with_dynamodb_local")
def dynamodb_local_test(h: Harness) -> dict[str, Any]:
    os.environ["DYNAMODB_LOCAL_URL"] = h.endpoint
    return attempt(lambda: h.run_test("app_test_dynamodb_local", h.name, "test_idempotent_lambda"))


@scenario("idempotency", "test_with_io_operations")
def io_operations_test(h: Harness) -> dict[str, Any]:
    return attempt(lambda: h.run_test("app_test_io_operations", h.name, "test_idempotent_lambda"))


# -- the batch examples ------------------------------------------------------------------------------------------


def batch(h: Harness, event: str) -> dict[str, Any]:
    m = h.load(h.name)
    response = attempt(lambda: m.lambda_handler(h.event(event), h.context()))
    logged = json.loads(json.dumps(standins.LOGGED, default=lambda value: type(value).__name__))
    return {"response": response, "logged": logged}


@scenario("batch", "getting_started_sqs")
def batch_sqs(h: Harness) -> dict[str, Any]:
    return batch(h, "sqs_batch.json")


@scenario("batch", "getting_started_kinesis")
def batch_kinesis(h: Harness) -> dict[str, Any]:
    return batch(h, "kinesis_batch.json")


@scenario("batch", "getting_started_dynamodb")
def batch_dynamodb(h: Harness) -> dict[str, Any]:
    return batch(h, "dynamodb_batch.json")


@scenario("batch", "getting_started_sqs_fifo")
def batch_fifo(h: Harness) -> dict[str, Any]:
    return batch(h, "sqs_fifo_batch.json")


@scenario("batch", "getting_started_error_handling")
def batch_error_handling(h: Harness) -> dict[str, Any]:
    return batch(h, "sqs_batch_empty_body.json")


@scenario("batch", "working_with_entire_batch_fail")
def batch_entire_fail(h: Harness) -> dict[str, Any]:
    return batch(h, "sqs_batch_all_bad.json")


@scenario("batch", "advanced_accessing_lambda_context")
def batch_lambda_context(h: Harness) -> dict[str, Any]:
    return batch(h, "sqs_single.json")


@scenario("batch", "getting_started_async")
def batch_async(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    response = m.lambda_handler(h.event("sqs_batch.json"), h.context())
    if asyncio.iscoroutine(response):
        response.close()
        return {"response": "a coroutine", "requests": len(standins.SENT)}
    return {"response": response, "requests": len(standins.SENT)}


@scenario("batch", "getting_started_with_test")
def batch_test(h: Harness) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "events").mkdir()
        (Path(directory) / "events" / "sqs_event.json").write_text((HERE / "events" / "sqs_batch.json").read_text())
        previous = Path.cwd()
        os.chdir(directory)  # the documented test reads events/sqs_event.json from where it runs
        try:
            return attempt(
                lambda: h.run_test("getting_started_with_test_app", h.name, "test_app_batch_partial_response")
            )
        finally:
            os.chdir(previous)


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
    global PT_REPO  # noqa: PLW0603 - set once, from the command line
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pt-repo", required=True, type=Path, help="a checkout of powertools-lambda-python")
    parser.add_argument("--library", choices=["ours", "powertools"], required=True)
    parser.add_argument("--endpoint", required=True, help="DynamoDB Local's URL")
    parser.add_argument("--output", required=True, help="where the JSON goes (examples print to stdout)")
    parser.add_argument("--only", nargs="*", help="some examples only (page/name)")
    args = parser.parse_args()
    PT_REPO = args.pt_repo.resolve()
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = args.endpoint
    standins.install()
    if args.library == "ours":
        shim.install()
    results = {name: run_one(args.library, args.endpoint, name) for name in args.only or sorted(SCENARIOS)}
    Path(args.output).write_text(json.dumps(results, sort_keys=True, default=repr))


if __name__ == "__main__":
    main()
