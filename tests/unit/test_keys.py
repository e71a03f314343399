"""Key selection: JMESPath with custom functions, canonical JSON, default keys per event source."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import gzip
import hashlib
import json

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import IdempotencyConfig, IdempotencyKeyError, canonical_json, keys, make_key
from consumer.event_sources import SQSRecord

AT = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc)


def digest(value) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def test_key_is_prefix_hash_of_the_canonical_selection():
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body)")
    record = {"body": json.dumps({"b": 2, "a": [1, {"z": None, "y": "ü"}]})}
    assert make_key(record, config) == "local#" + digest({"a": [1, {"y": "ü", "z": None}], "b": 2})


def test_equal_payloads_hash_equally_whatever_the_key_order_or_spacing():
    config = IdempotencyConfig(event_key_jmespath="json_parse(body)")
    one = make_key({"body": '{"a": 1, "b": [1, 2]}'}, config)
    two = make_key({"body": '{"b":[1,2],"a":1}'}, config)
    assert one == two
    assert make_key({"body": '{"a": 2, "b": [1, 2]}'}, config) != one


@pytest.mark.parametrize(
    ("record", "own_id"),
    [
        ({"messageId": "m-1", "eventSource": "aws:sqs", "attributes": {"ApproximateReceiveCount": "3"}}, "m-1"),
        (
            {"eventID": "shardId-000:4959", "eventSource": "aws:kinesis", "kinesis": {"data": "e30="}},
            "shardId-000:4959",
        ),
        ({"eventID": "c4ca4238", "eventSource": "aws:dynamodb", "dynamodb": {"Keys": {}}}, "c4ca4238"),
        ({"id": "e-7", "detail-type": "OrderPlaced", "source": "shop", "detail": {}}, "e-7"),
    ],
    ids=["sqs", "kinesis", "dynamodb", "eventbridge"],
)
def test_default_key_is_the_records_own_id(record, own_id):
    assert make_key(record, IdempotencyConfig()) == "local#" + digest(own_id)


def test_without_a_known_id_the_whole_record_is_hashed():
    assert make_key({"order": 1}, IdempotencyConfig()) == "local#" + digest({"order": 1})


def test_base64_and_gzip_functions_reach_into_kinesis_data():
    data = base64.b64encode(json.dumps({"user": "u-1"}).encode()).decode()
    packed = base64.b64encode(gzip.compress(json.dumps({"user": "u-1"}).encode())).decode()
    plain = make_key({"d": data}, IdempotencyConfig(event_key_jmespath="powertools_json(powertools_base64(d)).user"))
    zipped = make_key({"d": packed}, IdempotencyConfig(event_key_jmespath="json_parse(base64_gzip_decode(d)).user"))
    assert plain == zipped == "local#" + digest("u-1")


@pytest.mark.parametrize(
    ("expression", "record"),
    [
        ("json_parse(body).id", {"body": "not json {"}),
        ("base64_decode(data)", {"data": "***"}),
        ("base64_gzip_decode(data)", {"data": base64.b64encode(b"not gzip").decode()}),
    ],
)
def test_undecodable_input_is_a_key_error_naming_the_expression(expression, record):
    with pytest.raises(IdempotencyKeyError, match="event_key_jmespath") as caught:
        make_key(record, IdempotencyConfig(event_key_jmespath=expression))
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize("selection", [0, False, "0"])
def test_falsy_values_are_valid_keys(selection):
    assert make_key({"k": selection}, IdempotencyConfig(event_key_jmespath="k")) is not None


@pytest.mark.parametrize("selection", [None, "", [], {}])
def test_empty_selection_is_no_key(selection):
    with pytest.raises(IdempotencyKeyError, match=r"'k' selected nothing$"):
        make_key({"k": selection}, IdempotencyConfig(event_key_jmespath="k"))
    unguarded = IdempotencyConfig(event_key_jmespath="k", raise_on_no_idempotency_key=False)
    assert make_key({"k": selection}, unguarded) is None


def test_function_arguments_of_common_types_are_hashable():
    @dataclasses.dataclass
    class Order:
        id: int
        amount: decimal.Decimal
        tags: set[str]

    key = make_key(Order(7, decimal.Decimal("30.50"), {"b", "a"}), IdempotencyConfig())
    assert key == "local#" + digest({"id": 7, "amount": 30.5, "tags": ["a", "b"]})  # numbers by value


def test_unserializable_selection_is_a_key_error():
    with pytest.raises(IdempotencyKeyError, match="cannot be serialized"):
        make_key({"k": object()}, IdempotencyConfig(event_key_jmespath="k"))


def test_keys_that_serialize_alike_are_named_by_their_types_never_by_their_values():
    with pytest.raises(IdempotencyKeyError, match=r"serialize alike \(keys of types int, str\)") as caught:
        make_key({"card": {4111: "a", "4111": "b"}}, IdempotencyConfig(event_key_jmespath="card"))
    assert "4111" not in str(caught.value)


def test_other_hash_functions():
    key = make_key({"messageId": "m"}, IdempotencyConfig(hash_function="blake2b", key_prefix="p"))
    assert key == "p#" + hashlib.blake2b(b'"m"').hexdigest()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=6), JSON_VALUES, min_size=1, max_size=5), seed=st.randoms())
def test_key_ignores_key_order_and_whitespace_of_any_json_body(payload, seed):
    payload = {**payload, "id": 1}  # never a body of nothing but nulls, which selects no key
    items = list(payload.items())
    seed.shuffle(items)
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body)")
    compact = {"body": json.dumps(payload, separators=(",", ":"))}
    shuffled = {"body": json.dumps(dict(items), indent=2)}
    assert make_key(compact, config) == make_key(shuffled, config)


# -- values nested in a dict or a list: JMESPath sees into them, keys that worked before stay ------------------


@dataclasses.dataclass
class Order:
    order_id: str
    at: dt.datetime = AT


class Placed(pydantic.BaseModel):
    order_id: str
    at: dt.datetime = AT


@dataclasses.dataclass
class Wrapper:
    order: Order


SQS = {"messageId": "m-1", "receiptHandle": "r-1", "body": "{}", "attributes": {"ApproximateReceiveCount": "2"}}


@pytest.mark.parametrize(
    ("record", "expression", "selected"),
    [
        pytest.param({"tenant": "t-1", "order": Order("o-1")}, "order.order_id", "o-1", id="dataclass-in-a-dict"),
        pytest.param({"order": Placed(order_id="o-1")}, "order.order_id", "o-1", id="model-in-a-dict"),
        pytest.param({"orders": [Order("o-1")]}, "orders[0].order_id", "o-1", id="dataclass-in-a-list"),
        pytest.param({"orders": (Order("o-1"),)}, "orders[0].order_id", "o-1", id="dataclass-in-a-tuple"),
        pytest.param({"w": Wrapper(Order("o-1"))}, "w.order.order_id", "o-1", id="dataclass-in-a-dataclass"),
        pytest.param([{"order": Order("o-1")}], "[0].order.order_id", "o-1", id="in-a-list-record"),
        pytest.param({"record": SQSRecord.from_raw(SQS)}, "record.messageId", "m-1", id="typed-record-in-a-dict"),
        pytest.param({"order": Order("o-1")}, "[order.order_id, tenant]", ["o-1", None], id="multi-select"),
    ],
)
def test_a_value_nested_in_a_dict_or_a_list_is_selected_from(record, expression, selected):
    assert make_key(record, IdempotencyConfig(event_key_jmespath=expression)) == "local#" + digest(selected)


@pytest.mark.parametrize(
    ("record", "expression", "as_before"),
    [
        pytest.param({"order": Order("o-1")}, "", {"order": Order("o-1")}, id="whole-record"),
        pytest.param({"w": {"o": Placed(order_id="o-1")}}, "w.o", Placed(order_id="o-1"), id="a-whole-model"),
        pytest.param({"w": {"o": (Order("o-1"), 2)}}, "w.o", (Order("o-1"), 2), id="a-whole-tuple"),
        pytest.param({"w": {"r": SQSRecord.from_raw(SQS)}}, "w.r", SQSRecord.from_raw(SQS), id="a-typed-record"),
        pytest.param({"messageId": "m-1", "o": Order("o-1")}, None, "m-1", id="own-id"),
    ],
)
def test_keys_that_selected_a_nested_value_whole_are_unchanged(record, expression, as_before):
    # Keys are stored: a key that changed would run its record again. A model is hashed as model_dump(mode="json")
    # (a UTC datetime as ...Z), a typed record as its key_data(), as canonical_json hashed them before.
    config = IdempotencyConfig() if expression is None else IdempotencyConfig(event_key_jmespath=expression)
    assert make_key(record, config) == "local#" + digest(as_before)


def test_a_record_holding_itself_is_selected_from_as_before():
    record: dict[str, object] = {"a": {"id": 1}}
    record["self"] = record
    assert make_key(record, IdempotencyConfig(event_key_jmespath="a.id")) == "local#" + digest(1)


def test_plain_json_data_is_not_copied_to_select_a_key(monkeypatch):
    record = {"order": {"order_id": "o-1", "lines": [{"sku": "a"}]}, "tenant": "t-1"}
    seen = []
    monkeypatch.setattr(
        keys, "search", lambda expression, data, _options: seen.append(data) or data["order"]["order_id"]
    )
    make_key(record, IdempotencyConfig(event_key_jmespath="order.order_id"))
    assert len(seen) == 1
    assert seen[0] is record


def _keys_within(seconds, data, config):
    # make_key in a daemon thread: a walk that never ends fails the test instead of hanging the suite.
    import threading  # noqa: PLC0415 - this helper's alone

    got = []
    worker = threading.Thread(target=lambda: got.append(make_key(data, config)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert got, f"make_key did not return within {seconds} s"
    return got[0]


def test_a_record_that_holds_itself_or_shares_parts_is_walked_once():
    # Each object is converted once: walking a record that points to itself twice, or a tree whose levels share
    # one child, took 2 ** depth steps (the invocation hung until Lambda's timeout, on every redelivery).
    looped = {"id": "o-1"}
    looped["a"] = looped["b"] = looped
    key = _keys_within(10, looped, IdempotencyConfig(event_key_jmespath="a.id"))
    assert key == make_key("o-1", IdempotencyConfig())
    shared: dict = {"v": "leaf"}
    for _ in range(40):
        shared = {"left": shared, "right": shared, "v": None}
    tree = {"id": "t-1", "tree": shared}
    assert _keys_within(10, tree, IdempotencyConfig(event_key_jmespath="tree.v || id")) == make_key(
        "t-1", IdempotencyConfig()
    )
    nested = {"order": Order("o-1"), "same": None}
    nested["same"] = nested["order"]  # one dataclass twice: converted alike in both places
    plain = keys.plain_data(nested)
    assert plain["same"] == plain["order"] == {"order_id": "o-1", "at": AT}


@dataclasses.dataclass
class Node:
    child: object
    v: int = 7


def test_a_part_reached_deep_first_is_selected_from_where_it_is_shallow():
    # What a part converts to depends on its depth (past the walk's limit it is left as it is): one reached first
    # under a deep branch, then near the top, is converted again there. Memoized by object alone, the shallow path
    # got the deep path's cut-off form, and selected nothing.
    shared = Node(Node(Node(Node(None))))
    deep: object = shared
    for _ in range(31):
        deep = {"x": [deep]}
    config = IdempotencyConfig(event_key_jmespath="b.child.child.child.v")
    assert keys.key_selection({"a": deep, "b": shared}, config) == (7, False)
    assert (
        make_key({"a": deep, "b": shared}, config)
        == make_key({"b": shared}, config)
        == make_key(7, IdempotencyConfig())
    )
