"""Key selection: JMESPath with custom functions, canonical JSON, default keys per event source."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import gzip
import hashlib
import json

import jmespath
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import IdempotencyConfig, IdempotencyKeyError, canonical_json, keys, make_key
from consumer._jmespath import compile_expression, options, search
from consumer.sources import SQSRecord

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


STREAM = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
TABLE_STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/accounts/stream/2026-01-01T00:00:00.000"


@pytest.mark.parametrize(
    ("record", "own_id"),
    [
        ({"messageId": "m-1", "eventSource": "aws:sqs", "attributes": {"ApproximateReceiveCount": "3"}}, "m-1"),
        (
            {"eventID": "shardId-000:4959", "eventSourceARN": STREAM, "kinesis": {"data": "e30="}},
            [STREAM, "shardId-000:4959"],
        ),
        ({"eventID": "c4ca4238", "eventSourceARN": TABLE_STREAM, "dynamodb": {}}, [TABLE_STREAM, "c4ca4238"]),
        ({"id": "e-7", "detail-type": "OrderPlaced", "source": "shop", "detail": {}}, "e-7"),
    ],
    ids=["sqs", "kinesis", "dynamodb", "eventbridge"],
)
def test_default_key_is_the_records_own_id(record, own_id):
    assert make_key(record, IdempotencyConfig()) == "local#" + digest(own_id)


@pytest.mark.parametrize("source", ["kinesis", "dynamodb"])
def test_a_stream_records_default_key_is_its_id_in_its_stream(source):
    # eventID is unique within its stream only: two streams read by one function each have a shardId-000...:1.
    record = {"eventID": "shardId-000000000000:1", "eventSource": f"aws:{source}", source: {}}
    one, other = (make_key({**record, "eventSourceARN": f"{STREAM}-{n}"}, IdempotencyConfig()) for n in (1, 2))
    assert one != other
    assert keys.DEFAULT_KEY_EXPRESSIONS[source] == "eventID && [eventSourceARN, eventID]"
    assert make_key(record, IdempotencyConfig()) == "local#" + digest([None, "shardId-000000000000:1"])  # no ARN
    for missing in (None, ""):  # no eventID: no key, whatever the stream
        with pytest.raises(IdempotencyKeyError, match="selected nothing"):
            make_key({**record, "eventSourceARN": STREAM, "eventID": missing}, IdempotencyConfig())


def test_without_a_known_id_the_whole_record_is_hashed():
    assert make_key({"order": 1}, IdempotencyConfig()) == "local#" + digest({"order": 1})


@pytest.mark.parametrize(
    "record",
    [
        {"id": "e-7", "source": "shop"},  # an EventBridge event has a detail-type beside its id
        {"detail-type": "OrderPlaced", "source": "shop"},
        {"topic": "orders", "partition": 0},  # a Kafka record has its topic, partition and offset
        {"topic": "orders", "offset": 7},
        {"partition": 0, "offset": 7},
        {"offset": 7},
    ],
    ids=["id-alone", "detail-type-alone", "no-offset", "no-partition", "no-topic", "offset-alone"],
)
def test_a_record_with_only_part_of_a_sources_id_fields_is_hashed_whole(record):
    assert make_key(record, IdempotencyConfig()) == "local#" + digest(record)


def test_undecodable_input_is_named_by_the_record_it_came_in():
    with pytest.raises(IdempotencyKeyError) as refused:
        make_key({"messageId": "m-1", "body": "not json {"}, IdempotencyConfig(event_key_jmespath="json_parse(body)"))
    assert str(refused.value).startswith("event_key_jmespath 'json_parse(body)' failed on record 'm-1': ")


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


def test_a_function_given_a_value_of_another_type_is_a_key_error_naming_the_types_it_takes():
    with pytest.raises(IdempotencyKeyError) as refused:
        make_key({"messageId": "m-1", "amount": 5}, IdempotencyConfig(event_key_jmespath="length(amount)"))
    said = "length() takes string, array, object, got number"
    assert str(refused.value) == f"event_key_jmespath 'length(amount)' failed on record 'm-1': {said}"


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
    nan = float("nan")  # two NaN keys: unequal, so both are kept; both written NaN
    with pytest.raises(IdempotencyKeyError, match=r"serialize alike \(keys of types float, str\)") as caught:
        make_key({"card": {nan: "a", float("nan"): "b", "4111": "c"}}, IdempotencyConfig(event_key_jmespath="card"))
    assert "4111" not in str(caught.value)


@pytest.mark.parametrize(
    ("keyed", "as_text"),
    [
        ({1: "x"}, {"1": "x"}),
        ({None: "x"}, {"null": "x"}),
        ({True: "x"}, {"true": "x"}),
        ({1.5: "x", "a": 1}, {"1.5": "x", "a": 1}),
        ({decimal.Decimal("0.1"): "x"}, {'{"__ic__":"decimal","v":"0.1"}': "x"}),
        ({"card": {4111: "a", "4111": "b"}}, {"card": {"4111": "a", "4111 ": "b"}}),
    ],
)
def test_a_dict_key_that_is_no_string_never_keys_as_its_text(keyed, as_text):
    # {1: x} and {"1": x} were one key: an argument of an @idempotent_function keyed by an int replayed the result
    # of one keyed by that int's text.
    config = IdempotencyConfig(key_prefix="p")
    assert make_key(keyed, config) != make_key(as_text, config)
    assert make_key({"tenant": "t", "data": keyed}, config) != make_key({"tenant": "t", "data": as_text}, config)


def test_equal_numbers_as_dict_keys_still_key_alike():
    config = IdempotencyConfig(key_prefix="p")
    assert (
        make_key({1: "x"}, config) == make_key({1.0: "x"}, config) == make_key({decimal.Decimal("1.00"): "x"}, config)
    )
    assert canonical_json({2: "b", 1: "a", "z": None}) == '{"__ic__":"dict","v":[["z",null],[1,"a"],[2,"b"]]}'


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


@settings(max_examples=300, deadline=None)
@given(
    record=st.dictionaries(st.sampled_from("abc"), JSON_VALUES | st.floats(allow_nan=False), max_size=3),
    expression=st.sampled_from(["a", "[a, b]", "a && b", "a && [b, c]", "a && b && c", "[a] && b", "a && b.c"]),
)
def test_expressions_looked_up_directly_select_what_jmespath_selects(record, expression):
    # Fields, lists of fields and ``&&`` of those skip JMESPath's tree walk (the default stream key is one).
    assert search(compile_expression(expression), record, options(1024)) == jmespath.search(expression, record)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(st.text(), max_size=4))
def test_a_list_of_strings_is_written_as_the_encoder_writes_it(items):
    assert canonical_json(items) == canonical_json(tuple(items))  # a tuple takes the encoder's path


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


@pytest.mark.parametrize(
    "expression",
    [
        "tenant",
        "@",
        "`1`",
        "'t-1'",
        "[tenant, messageId]",
        "tenant || messageId",
        "tenant && messageId",
        "!tenant",
        "header(@, 'Idempotency-Key')",
        "header(@, 'Idempotency-Key') || messageId",
    ],
)
def test_a_record_holding_a_dataclass_is_not_walked_for_an_expression_reading_its_top_level(expression):
    # Walking converts every dataclass, model and typed record of the record (a copy, on the hot path): only an
    # expression that reads below the top level needs it. The top level, its literals and a producer's header
    # select the same from the record as it is (a whole dataclass selected hashes as its converted form).
    record = {"messageId": "m-1", "tenant": "t-1", "order": Order("o-1")}
    assert keys.selectable(record, compile_expression(expression)) is record


def test_a_function_other_than_header_reads_a_dataclass_as_its_fields():
    record = {"messageId": "m-1", "order": Order("o-1")}
    assert make_key(record, IdempotencyConfig(event_key_jmespath="length(order)")) == "local#" + digest(2)


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


WRAPS = {  # a container of each kind around a value, and the step of a key expression into it
    "dict": (lambda value: {"x": value}, "x."),
    "list": (lambda value: [value], "[0]."),
    "dataclass": (Node, "child."),
    "typed-record": (lambda value: SQSRecord.from_raw({**SQS, "part": value}), "part."),
}


@pytest.mark.parametrize(("kind", "levels"), [("dict", 64), ("list", 64), ("dataclass", 32), ("typed-record", 32)])
def test_the_walk_converts_values_down_to_64_levels_and_leaves_deeper_ones_as_they_are(kind, levels):
    # The walk's cost per record is bounded, and what a key selects does not move between releases (keys are
    # stored): a dataclass under 64 levels (a dataclass or a typed record counts two: itself and its fields) is
    # seen into; deeper, JMESPath sees it as it is, and selects nothing from it.
    wrap, step = WRAPS[kind]

    def nested(levels):
        value: object = Order("o-1")
        for _ in range(levels):
            value = wrap(value)
        path = f"r.{step * levels}order_id".replace(".[", "[")
        return {"r": value}, IdempotencyConfig(event_key_jmespath=path)

    assert make_key(*nested(levels)) == "local#" + digest("o-1")
    with pytest.raises(IdempotencyKeyError, match="selected nothing"):
        make_key(*nested(levels + 1))


class Dumped:
    """A model-like value: converted by its model_dump, which counts its calls."""

    calls = 0

    def model_dump(self, mode: str) -> dict:
        Dumped.calls += 1
        return {"mode": mode}


@pytest.mark.parametrize("kind", ["dict", "list", "dataclass", "typed-record"])
def test_a_part_shared_by_many_paths_through_distinct_containers_is_converted_once(kind):
    # Twelve levels, each two containers of one part: 4096 paths to the part at the bottom, each as deep. Converted
    # once per path, a record so built (or a graph its producer shares parts of) costs 4096 conversions.
    wrap, _ = WRAPS[kind]
    shared: object = Dumped()
    for _ in range(12):
        shared = {"a": wrap(shared), "b": wrap(shared)}
    Dumped.calls = 0
    keys.plain_data({"record": shared})
    assert Dumped.calls == 1


@pytest.mark.parametrize(
    ("record", "named"),
    [
        ({"topic": "orders", "partition": 0, "offset": 7}, "Kafka record orders-0@7"),
        ({"messageId": "m-1", "offset": 7}, "record 'm-1'"),  # an offset alone makes no Kafka record
        ({"messageId": "m-1", "topic": "orders"}, "record 'm-1'"),
        ({"id": 7, "detail-type": "Paid"}, "the record"),  # an id that is no text is not quoted
        (["offset", "topic"], "the record"),
    ],
)
def test_a_key_error_names_a_kafka_record_by_its_place_and_any_other_by_its_own_id(record, named):
    assert keys.record_named(record) == named


def _body_number(text: str) -> str | None:
    return make_key({"body": f'{{"n": {text}}}'}, IdempotencyConfig(event_key_jmespath="powertools_json(body).n"))


@pytest.mark.parametrize(
    ("one", "other", "meet"),
    [
        ("9007199254740993.0", "9007199254740992.0", True),  # 16 significant digits, one double
        ("8.755399421360170", "8.755399421360171", True),
        ("0.10000000000000001", "0.1", True),
        ("9007199254740992", "9007199254740993.0", True),  # an integer meets the float of its value
        ("1e400", "2e400", True),  # both Infinity
        ("1e-400", "0", True),
        ("9007199254740993", "9007199254740992", False),  # integers parse exactly, however long
        ("123456789012345678901234567890", "123456789012345678901234567891", False),
        ("0.100000000000001", "0.100000000000002", False),  # 15 significant digits
    ],
)
def test_json_numbers_key_by_their_value_once_parsed(one, other, meet):
    assert (_body_number(one) == _body_number(other)) is meet


@settings(max_examples=300, deadline=None)
@given(digits=st.integers(10**14, 10**15 - 2), step=st.integers(1, 10**14), exponent=st.integers(-300, 290))
def test_fractional_json_numbers_of_at_most_fifteen_significant_digits_never_meet(digits, step, exponent):
    other = min(digits + step, 10**15 - 1)
    assert _body_number(f"{digits}e{exponent}") != _body_number(f"{other}e{exponent}")
