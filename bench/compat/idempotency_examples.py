"""The scenarios of Powertools' idempotency page: its examples, each run as the page describes it."""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any

import standins
from harness import Harness, attempt, scenario


@scenario("idempotency", "getting_started_with_idempotency", "working_with_custom_idempotency_key_prefix")
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
        "key_prefixes": prefixes(h),
    }


def prefixes(h: Harness) -> list[str]:
    """What precedes the hash in the keys of the records left, when the example sets it (``key_prefix=``)."""
    keys = [item["id"]["S"].rpartition("#")[0] for item in h.items()]
    return sorted({key for key in keys if key.startswith("my_custom_prefix")})


@scenario(
    "idempotency",
    "working_with_idempotent_function_dataclass",
    "working_with_idempotent_function_pydantic",
    "working_with_custom_idempotency_key_prefix_standalone",
)
def idempotent_function_argument(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    handled = [m.lambda_handler({}, h.context()) for _ in range(2)]
    direct = m.process_order(order=m.Order(item=m.OrderItem(sku="fake", description="sample"), order_id=1))
    other = m.process_order(order=m.Order(item=m.OrderItem(sku="fake", description="sample"), order_id=2))
    return {"handler": handled, "direct": [direct, other], "records": len(h.items()), "key_prefixes": prefixes(h)}


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


@scenario("idempotency", "working_with_response_hook")
def response_hook(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    event = {"order_id": "o-1", "order": {"sku": "book-1"}}
    first = m.lambda_handler(copy.deepcopy(event), h.context())
    again = m.lambda_handler(copy.deepcopy(event), h.context())
    return {
        "first": sorted(first),
        "again": sorted(again),
        "replayed_the_order": first.get("order") == again.get("order"),
        "records": len(h.items()),
    }


@scenario(
    "idempotency",
    "working_with_dataclass_deduced_output_serializer",
    "working_with_dataclass_explicitly_output_serializer",
    "working_with_pydantic_deduced_output_serializer",
    "working_with_pydantic_explicitly_output_serializer",
    "working_with_idempotent_function_custom_output_serializer",
)
def output_serializer(h: Harness) -> dict[str, Any]:
    """The handler twice, then the function twice with another order: the replay is the declared output type."""
    m = h.load(h.name)
    handled = [m.lambda_handler({}, h.context()) for _ in range(2)]
    order = m.Order(item=m.OrderItem(sku="fake", description="sample"), order_id=2)
    outputs = [m.process_order(order=order) for _ in range(2)]
    return {
        "handler": handled,
        "outputs": [[type(output).__name__, getattr(output, "order_id", output)] for output in outputs],
        "records": len(h.items()),
    }
