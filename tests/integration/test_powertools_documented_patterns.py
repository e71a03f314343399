"""The patterns Powertools' documentation teaches, written with its names, each doing here what the page says.

``make powertools-compat`` runs Powertools' own examples from a checkout of its repository; these tests are ours.
Each takes one documented pattern (a whole handler keyed on its event, a payload subset, custom attribute names, the
local cache, a test's context...) and proves its outcome against DynamoDB Local, with Powertools' spelling of the
names: ``persistence_store=``, ``IdempotencyPersistenceLayerError``, ``register_lambda_context``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import time
import types
import uuid

import boto3
import pydantic
import pytest
from botocore.config import Config
from events import sqs_event, sqs_record
from fakes import FakeContext

from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyKeyError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
    idempotent,
    idempotent_function,
    process_partial_response,
)
from persistence import DynamoDBPersistenceLayer

pytestmark = pytest.mark.dynamodb


@pytest.fixture
def table(ddb_server):
    """A fresh table on DynamoDB Local, and a store on it."""
    name = ddb_server.create_table()
    return types.SimpleNamespace(
        name=name,
        store=DynamoDBPersistenceLayer(table_name=name, boto3_client=ddb_server.client()),
        items=lambda: ddb_server.client().scan(TableName=name)["Items"],
    )


def payment_handler(store, config=None):
    """A handler that makes a new payment id on each run, as the getting-started page's does."""
    runs = []

    @idempotent(persistence_store=store, config=config or IdempotencyConfig(event_key_jmespath=""))
    def lambda_handler(event, context):
        runs.append(event)
        return {"payment_id": str(uuid.uuid4()), "message": "success", "statusCode": 200}

    return lambda_handler, runs


def test_a_handler_keyed_on_its_whole_event_replays_a_duplicate_and_runs_another(table):
    handler, runs = payment_handler(table.store)
    first = handler({"user_id": "u-42", "product_id": "p-1"}, FakeContext())
    assert handler({"user_id": "u-42", "product_id": "p-1"}, FakeContext()) == first
    assert handler({"user_id": "u-43", "product_id": "p-1"}, FakeContext())["payment_id"] != first["payment_id"]
    assert len(runs) == len(table.items()) == 2


@dataclasses.dataclass
class Order:
    order_id: int
    sku: str


class OrderModel(pydantic.BaseModel):
    order_id: int
    sku: str


@pytest.mark.parametrize("kind", [Order, OrderModel], ids=["dataclass", "pydantic"])
def test_a_function_is_keyed_on_a_field_of_its_dataclass_or_model_argument(table, kind):
    config, runs = IdempotencyConfig(event_key_jmespath="order_id"), []

    @idempotent_function(data_keyword_argument="order", config=config, persistence_store=table.store)
    def process_order(order):
        runs.append(order.order_id)
        return f"processed order {order.order_id}"

    config.register_lambda_context(FakeContext())
    results = [process_order(order=kind(order_id=n, sku="sku-1")) for n in (1, 1, 2)]
    assert results == ["processed order 1", "processed order 1", "processed order 2"]
    assert runs == [1, 2]
    assert len(table.items()) == 2


def test_a_payload_subset_replays_a_resent_request_and_runs_another_product(table):
    config = IdempotencyConfig(event_key_jmespath='powertools_json(body).["user_id", "product_id"]')
    handler, runs = payment_handler(table.store, config)
    event = {"requestContext": {"requestId": "r-1"}, "body": json.dumps({"user_id": "u-1", "product_id": "p-1"})}
    first = handler(event, FakeContext())
    assert handler({**event, "requestContext": {"requestId": "r-2"}}, FakeContext()) == first
    handler({**event, "body": json.dumps({"user_id": "u-1", "product_id": "p-2"})}, FakeContext())
    assert len(runs) == len(table.items()) == 2


def test_a_store_failure_is_caught_by_its_powertools_name_and_an_error_after_the_call_undoes_nothing(table, ddb_server):
    posts = []
    missing = DynamoDBPersistenceLayer(table_name="no-such-table", boto3_client=ddb_server.client())

    def handler_on(store):
        @idempotent_function(data_keyword_argument="data", persistence_store=store, key_prefix="comments")
        def call_external_service(data):
            posts.append(data)
            return {"id": len(posts)}

        def lambda_handler(event, context):
            try:
                call_external_service(data=event)
            except IdempotencyPersistenceLayerError as error:
                raise RuntimeError("cannot reach the store") from error
            raise SyntaxError("an error after the idempotent call")

        return lambda_handler

    for _ in range(2):
        with pytest.raises(SyntaxError):
            handler_on(table.store)({"post": 1}, None)
    assert posts == [{"post": 1}]  # the call committed before the error that followed it
    with pytest.raises(RuntimeError, match="cannot reach the store"):
        handler_on(missing)({"post": 1}, None)


def test_the_attribute_names_are_the_ones_given(ddb_server):
    name = ddb_server.create_table(key_attr="idempotency_key")
    store = DynamoDBPersistenceLayer(
        table_name=name,
        key_attr="idempotency_key",
        expiry_attr="expires_at",
        status_attr="current_status",
        data_attr="result_data",
        validation_key_attr="validation_key",
        boto3_client=ddb_server.client(),
    )

    @idempotent(persistence_store=store)
    def lambda_handler(event, context):
        return event

    assert [lambda_handler({"order": "o-1"}, None) for _ in range(2)] == [{"order": "o-1"}] * 2
    (item,) = ddb_server.client().scan(TableName=name)["Items"]
    assert {"idempotency_key", "expires_at", "current_status", "result_data"} <= set(item)


def test_the_local_cache_answers_a_duplicate_without_a_request(table):
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body)", use_local_cache=True)
    sent = []
    table.store.client.meta.events.register("before-send.dynamodb.*", lambda **_: sent.append(1))

    @idempotent(persistence_store=table.store, config=config)
    def lambda_handler(event, context):
        return event

    event = {"body": json.dumps({"user_id": "u-1"})}
    assert lambda_handler(event, FakeContext()) == event
    first = len(sent)
    assert lambda_handler(copy.deepcopy(event), FakeContext()) == event
    assert (first, len(sent) - first) == (2, 0)


def test_a_record_expires_after_the_configured_window(table):
    config = IdempotencyConfig(event_key_jmespath="body", expires_after_seconds=24 * 60 * 60)

    @idempotent(persistence_store=table.store, config=config)
    def lambda_handler(event, context):
        return event

    lambda_handler({"body": "b-1"}, FakeContext())
    (item,) = table.items()
    assert round((int(item["expiration"]["N"]) - time.time()) / 3600) == 24


def test_a_tampered_payload_under_a_known_key_is_refused(table):
    config = IdempotencyConfig(event_key_jmespath='["user_id", "product_id"]', payload_validation_jmespath="amount")
    handler, runs = payment_handler(table.store, config)
    first = handler({"user_id": "u-1", "product_id": "p-1", "amount": 500}, FakeContext())
    assert handler({"user_id": "u-1", "product_id": "p-1", "amount": 500}, FakeContext()) == first
    with pytest.raises(IdempotencyValidationError):
        handler({"user_id": "u-1", "product_id": "p-1", "amount": 10}, FakeContext())
    assert len(runs) == 1


def test_a_required_key_missing_from_the_event_is_an_error(table):
    config = IdempotencyConfig(event_key_jmespath='["user.uid", "order_id"]', raise_on_no_idempotency_key=True)
    handler, _ = payment_handler(table.store, config)
    assert handler({"user": {"uid": "u-1"}, "order_id": 7}, FakeContext())["statusCode"] == 200
    with pytest.raises(IdempotencyKeyError):
        handler({"user": {"name": "no uid"}}, FakeContext())


def test_a_store_built_from_a_session_or_a_client_config_reaches_its_table(table, ddb_server, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", ddb_server.endpoint_url)
    responses, runs = [], 0
    for store in (
        DynamoDBPersistenceLayer(table_name=table.name, boto3_session=boto3.session.Session()),
        DynamoDBPersistenceLayer(table_name=table.name, boto_config=Config(retries={"max_attempts": 2})),
    ):
        handler, ran = payment_handler(store)
        responses += [handler({"user_id": "u-1"}, None) for _ in range(2)]
        runs += len(ran)
    assert runs == 1  # the second store replayed the first one's record
    assert responses == [responses[0]] * 4
    assert len(table.items()) == 1


def test_a_composite_key_table_holds_the_key_in_its_sort_key(ddb_server):
    name = ddb_server.create_table(key_attr="id", sort_key_attr="sort_key")
    store = DynamoDBPersistenceLayer(table_name=name, sort_key_attr="sort_key", boto3_client=ddb_server.client())
    handler, runs = payment_handler(store, IdempotencyConfig(event_key_jmespath="order_id"))
    assert handler({"order_id": 1}, None) == handler({"order_id": 1}, None)
    (item,) = ddb_server.client().scan(TableName=name)["Items"]
    assert item["id"]["S"] != item["sort_key"]["S"]
    assert item["sort_key"]["S"].startswith("local#")
    assert len(runs) == 1


def test_a_wrapper_that_unwraps_the_event_keys_the_handler_on_what_it_passes(table):
    def unwrap_body(handler):  # what a validation envelope does: the handler sees the parsed body
        @functools.wraps(handler)
        def wrapper(event, context):
            return handler(json.loads(event["body"]), context)

        return wrapper

    runs = []

    @unwrap_body
    @idempotent(persistence_store=table.store, config=IdempotencyConfig(event_key_jmespath="message"))
    def lambda_handler(event, context):
        runs.append(event)
        return {"message": event["message"], "statusCode": 200}

    responses = [lambda_handler({"body": json.dumps({"message": "hello"})}, FakeContext()) for _ in range(2)]
    assert responses == [{"message": "hello", "statusCode": 200}] * 2
    assert len(runs) == len(table.items()) == 1


def test_replacing_the_stores_client_points_it_at_another_server(ddb_server, table):
    store = DynamoDBPersistenceLayer(table_name=table.name)  # its own client would go to AWS's endpoint
    store.client = ddb_server.client()  # what Powertools' testing page does
    handler, _ = payment_handler(store)
    handler({"user_id": "u-1"}, None)
    assert len(table.items()) == 1


def test_a_tests_context_without_remaining_time_and_the_processors_messages(table):
    # A test's hand-made context may lack get_remaining_time_in_millis: no deadline is then enforced.
    context = types.SimpleNamespace(function_name="test", aws_request_id="r-1")
    event = sqs_event(sqs_record("m-1", {"ok": 1}), sqs_record("m-2", None, raw_body=True))
    event["Records"][1]["body"] = ""
    processor = BatchProcessor(EventType.SQS, store=table.store)

    def record_handler(record):
        if not record["body"]:
            raise ValueError("an empty body")
        return record.json_body

    response = process_partial_response(event, record_handler, processor, context)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-2"}]}
    assert processor.success_messages == [event["Records"][0]]  # as delivered
    assert [record.message_id for record in processor.fail_messages] == ["m-2"]  # typed
