"""Stored results replay as the value (and type) the handler returned; keys hash numbers by value."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import json
import logging
import math
import unicodedata
import uuid

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer._serde import ResultEncodingError, canonical_json, decode_result, encode_result

D = decimal.Decimal


# -- an exact comparison: 1 == 1.0 == True, NaN != NaN, and aware datetimes compare as instants --------------


def same(a, b) -> bool:  # noqa: PLR0911 - one rule per type
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, D):
        return str(a) == str(b)  # keeps the exponent, the sign of zero, NaN payloads and sNaN apart
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, (set, frozenset)):
        rest = list(b)
        for x in a:
            match = next((i for i, y in enumerate(rest) if same(x, y)), None)
            if match is None:
                return False
            rest.pop(match)
        return not rest
    if isinstance(a, (dt.datetime, dt.time)):
        return (
            a.replace(tzinfo=None) == b.replace(tzinfo=None)
            and a.fold == b.fold
            and type(a.tzinfo) is type(b.tzinfo)
            and a.utcoffset() == b.utcoffset()
            and a.tzname() == b.tzname()
        )
    return a == b


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (1, True),
        (0.0, -0.0),
        ((1,), [1]),
        ({1: "a"}, {"1": "a"}),
        ({1: "a"}, {True: "a"}),
        (D("30.50"), D("30.5")),
        (D("NaN"), D("sNaN")),
        ({1, 2}, frozenset({1, 2})),
        ({(1, 2)}, {(1, 2.0)}),
        (b"ab", bytearray(b"ab")),
        (
            dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc),
            dt.datetime(2024, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        ),
        (dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, fold=1)),  # noqa: DTZ001 - naive on purpose
        ([float("nan")], [0.0]),
    ],
)
def test_the_comparison_tells_apart_what_plain_equality_does_not(a, b):
    assert not same(a, b)
    assert not same(b, a)


def test_the_comparison_accepts_equal_values():
    nan = float("nan")
    assert same([nan, {1: (D("1.0"),)}, {nan}], [float("nan"), {1: (D("1.0"),)}, {float("nan")}])


# -- strategies ---------------------------------------------------------------------------------------------

fixed_offsets = (
    st.none()
    | st.just(dt.timezone.utc)
    | st.integers(-86_399, 86_399).map(lambda seconds: dt.timezone(dt.timedelta(seconds=seconds)))
)
folds = st.integers(0, 1)
datetimes = st.builds(lambda d, fold: d.replace(fold=fold), st.datetimes(timezones=fixed_offsets), folds)
times = st.builds(lambda t, fold: t.replace(fold=fold), st.times(timezones=fixed_offsets), folds)
texts = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=12)  # lone surrogates too
decimals_by_parts = st.builds(
    lambda sign, coefficient, exponent: D((sign, tuple(map(int, str(coefficient))), exponent)),
    st.integers(0, 1),
    st.integers(0, 10**40),
    st.integers(-60, 60),
)
special_decimals = st.sampled_from(
    [D("30.50"), D("-0"), D("0E-7"), D("1E+3"), D("Infinity"), D("-Infinity"), D("NaN"), D("-NaN"), D("NaN12")]
)
hashable_decimals = st.decimals(allow_nan=False) | decimals_by_parts | special_decimals
hashable_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | texts
    | hashable_decimals
    | st.binary(max_size=8)
    | datetimes
    | st.dates()
    | times
    | st.timedeltas()
    | st.uuids()
)
hashables = st.recursive(
    hashable_scalars,
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
scalars = (
    hashable_scalars
    | st.decimals(allow_nan=True, allow_infinity=True)  # sNaN (unhashable) included
    | st.binary(max_size=8).map(bytearray)
)
str_keys = texts | st.sampled_from(["__ic__", "v", "a"])  # the reserved key must round-trip too
values = st.recursive(
    scalars | hashables,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(str_keys, inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=20,
)
plain_keys = st.text(max_size=6).filter(lambda k: k != "__ic__")  # that one is escaped
plain_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_keys, inner, max_size=4),
    max_leaves=20,
)


# -- results ------------------------------------------------------------------------------------------------


@settings(max_examples=1000, deadline=None)
@given(value=values)
def test_every_supported_value_replays_with_its_exact_type_and_value(value):
    text = encode_result(value)
    text.encode("utf-8")  # what the stores do with it
    assert same(decode_result(text), value), text


@settings(max_examples=500, deadline=None)
@given(value=plain_json)
def test_plain_json_is_stored_as_the_same_plain_json_as_before(value):
    text = encode_result(value)
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert same(decode_result(text), value)


@settings(max_examples=300, deadline=None)
@given(value=plain_json)
def test_text_stored_by_earlier_versions_decodes_as_plain_json(value):
    old = json.dumps(value, indent=1, ensure_ascii=True)
    assert same(decode_result(old), json.loads(old))


@settings(max_examples=300, deadline=None)
# Unique by hash too: False, 0 and 0.0 are equal to Python, so a set keeps whichever it meets first; the
# sets built in two orders would then differ, not just their order.
@given(items=st.lists(hashables, max_size=6, unique_by=(encode_result, hash)), seed=st.randoms())
def test_equal_sets_are_stored_alike_whatever_their_order(items, seed):
    shuffled = list(items)
    seed.shuffle(shuffled)
    assert encode_result(set(items)) == encode_result(set(shuffled))
    assert encode_result(frozenset(items)) == encode_result(frozenset(shuffled))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (D("30.50"), '{"__ic__":"decimal","v":"30.50"}'),
        ((1, "a"), '{"__ic__":"tuple","v":[1,"a"]}'),
        ({1: "a"}, '{"__ic__":"dict","v":[[1,"a"]]}'),
        ({"__ic__": "x"}, '{"__ic__":"dict","v":[["__ic__","x"]]}'),
        (b"\x00\xff", '{"__ic__":"bytes","v":"AP8="}'),
        (float("-inf"), '{"__ic__":"float","v":"-inf"}'),
        ("a\ud83d", '{"__ic__":"str","v":["a",55357]}'),
        (dt.datetime(2024, 5, 6, 7, 8, 9, 10, dt.timezone(dt.timedelta(hours=-3))), None),
        ({"when": dt.date(2024, 5, 6)}, '{"when":{"__ic__":"date","v":"2024-05-06"}}'),
    ],
)
def test_values_json_cannot_hold_are_tagged_objects_an_operator_can_read(value, text):
    stored = encode_result(value)
    if text is not None:
        assert stored == text
    else:
        assert stored == '{"__ic__":"datetime","v":"2024-05-06T07:08:09.000010-03:00"}'
    assert same(decode_result(stored), value)


def test_a_surrogate_pair_written_as_two_code_points_stays_two_code_points():
    value = {"k\ud83d\ude00": "\ud83d\ude00"}
    assert same(decode_result(encode_result(value)), value)
    assert decode_result(encode_result(value)) != {"😀": "😀"}


@pytest.mark.parametrize(
    "text",
    ['{"__ic__":1}', '{"__ic__":"nope","v":1}', '{"__ic__":"tuple","v":[],"w":2}', '[{"__ic__":["tuple"],"v":1}]'],
)
def test_objects_that_are_not_tags_decode_as_plain_json(text):
    assert decode_result(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"__ic__":"bytes","v":"***"}',
        '{"__ic__":"dict","v":[[[1],2]]}',
        '{"__ic__":"decimal","v":"thirty"}',
        '{"__ic__":"datetime","v":"yesterday"}',
        '{"__ic__":"timedelta","v":"x"}',
        "not json",
    ],
)
def test_a_malformed_stored_result_is_a_value_error(text):
    with pytest.raises(ValueError):
        decode_result(text)


# -- what cannot be rebuilt: stored as its plain form, with one warning per type ----------------------------


def test_dataclasses_and_models_replay_as_their_plain_dict_with_one_warning_per_type(caplog):
    @dataclasses.dataclass
    class Charge:
        amount: D
        tags: tuple[str, ...]

    class Receipt(pydantic.BaseModel):
        amount: D
        at: dt.datetime

    at = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        first = decode_result(encode_result(Charge(D("30.50"), ("a",))))
        decode_result(encode_result([Charge(D("1"), ())]))
        model = decode_result(encode_result(Receipt(amount=D("30.50"), at=at)))
        decode_result(encode_result(Receipt(amount=D("1"), at=at)))
    assert same(first, {"amount": D("30.50"), "tags": ("a",)})
    assert same(model, Receipt(amount=D("30.50"), at=at).model_dump(mode="json"))
    warnings = [r.getMessage() for r in caplog.records if r.name == "idempotent_consumer"]
    assert len(warnings) == 2, warnings
    assert "Charge replay as a dict" in warnings[0]
    assert "Receipt replay as a dict" in warnings[1]


def test_subclasses_of_supported_types_replay_as_their_base_type(caplog):
    class Status(str, enum.Enum):
        DONE = "done"

    class Level(enum.IntEnum):
        HIGH = 3

    point = collections.namedtuple("point", "x y")  # noqa: PYI024
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        value = [Status.DONE, Level.HIGH, collections.OrderedDict(a=1), point(1, 2)]
        assert same(decode_result(encode_result(value)), ["done", 3, {"a": 1}, (1, 2)])
    assert len(caplog.records) == 4


def test_a_zoneinfo_datetime_replays_with_its_fixed_offset(caplog):
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        paris = zoneinfo.ZoneInfo("Europe/Paris")
    except zoneinfo.ZoneInfoNotFoundError:
        pytest.skip("no time zone database")
    value = dt.datetime(2024, 7, 1, 12, tzinfo=paris)
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        replayed = decode_result(encode_result(value))
    assert replayed == value
    assert replayed.utcoffset() == dt.timedelta(hours=2)
    assert type(replayed.tzinfo) is dt.timezone
    assert "replay as a fixed UTC offset" in caplog.text


# -- failures: one error type, the cause chained ------------------------------------------------------------


class Failing:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def model_dump(self, **_):
        raise self.error


def _cycles():
    listed: list = []
    listed.append(listed)
    mapped: dict = {}
    mapped["me"] = [mapped]

    @dataclasses.dataclass
    class Node:
        next: object = None

    node = Node()
    node.next = node
    return [listed, mapped, node, (listed,), {"deep": [[[[listed]]]]}]


def _nested(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {"a": [1, {"b": object()}]},
        {object(): 1},
        10**5000,  # more digits than int's str() allows
        _nested(100_000),
        dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(microseconds=1))),
        Failing(TypeError("t")),
        Failing(ValueError("v")),
        Failing(OverflowError("o")),
        Failing(decimal.InvalidOperation("i")),
        Failing(RecursionError("r")),
        Failing(UnicodeEncodeError("utf-8", "\ud83d", 0, 1, "surrogates not allowed")),
        Failing(ArithmeticError("model_dump exploded")),
        Failing(KeyError("k")),
        *_cycles(),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, Failing) else f"model_dump-{type(v.error).__name__}",
)
def test_any_exception_while_encoding_is_a_result_encoding_error_with_its_cause(value):
    with pytest.raises(ResultEncodingError, match="cannot be stored") as caught:
        encode_result(value)
    assert isinstance(caught.value, ValueError)
    assert caught.value.__cause__ is not None
    if isinstance(value, Failing):
        assert caught.value.__cause__ is value.error


def test_nesting_is_bounded_so_whatever_is_stored_can_be_read_back():
    assert same(decode_result(encode_result(_nested(255))), _nested(255))
    with pytest.raises(ResultEncodingError, match="nested deeper than 256 levels"):
        encode_result(_nested(300))


@pytest.mark.parametrize("value", _cycles()[:3], ids=["list", "dict", "dataclass"])
def test_a_cycle_is_named(value):
    with pytest.raises(ResultEncodingError, match="reference cycle"):
        encode_result(value)


def test_the_error_names_the_type_of_the_result_and_of_the_culprit():
    class Opaque:
        pass

    with pytest.raises(ResultEncodingError, match=r"type list cannot be stored: TypeError: .*Opaque"):
        encode_result([Opaque()])


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SystemExit(3)])
def test_base_exceptions_that_are_not_exceptions_propagate_unchanged(error):
    with pytest.raises(type(error)) as caught:
        encode_result({"result": Failing(error)})
    assert caught.value is error


@pytest.mark.parametrize(
    "value",
    [
        D("Infinity"),
        D("sNaN"),
        D("-sNaN"),
        {"text": "\ud83d"},
        {"text": "\ud83d" + "x" * 150_000},
        float("nan"),
        _nested(200),
    ],
    ids=["decimal-infinity", "decimal-snan", "decimal-minus-snan", "surrogate", "surrogate-large", "nan", "nested"],
)
def test_results_the_old_encoding_refused_are_stored_and_replay(value):
    text = encode_result(value)
    text.encode("utf-8")
    assert same(decode_result(text), value)


# -- canonical JSON for keys --------------------------------------------------------------------------------

key_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats().filter(lambda f: not f.is_integer())  # NaN and infinities included
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_keys, inner, max_size=4),
    max_leaves=16,
)


@settings(max_examples=500, deadline=None)
@given(value=key_json)
def test_keys_of_strings_ints_bools_null_fractions_lists_and_dicts_hash_as_before(value):
    before = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == before
    # Beside a Decimal the value takes the full walk, which must agree.
    assert canonical_json([value, D("0.5")]) == f"[{before},0.5]"


def _spellings(number):
    """Equal numbers of other types: int, float, Decimal, Decimal with trailing zeros."""
    exact = D(number) if isinstance(number, (int, float)) else number
    sign, digits, exponent = exact.as_tuple()
    out = [number, exact, D((sign, (*digits, 0, 0), exponent - 2))]
    if exact == exact.to_integral_value() and abs(exact) < 10**30:
        out.append(int(exact))
    if abs(exact) < D("1e300") and D(float(exact)) == exact:
        out.append(float(exact))
    return out


finite_numbers = (
    st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.decimals(allow_nan=False, allow_infinity=False)
    | decimals_by_parts
)


@settings(max_examples=500, deadline=None)
@given(number=finite_numbers, data=st.data())
def test_equal_numbers_of_any_type_and_spelling_give_one_key(number, data):
    spellings = _spellings(number)
    one, other = data.draw(st.sampled_from(spellings)), data.draw(st.sampled_from(spellings))
    assert one == other
    assert canonical_json(one) == canonical_json(other), (one, other)
    assert canonical_json({"n": [one], one: 1}) == canonical_json({"n": [other], other: 1})


def _kind(value):
    return "number" if isinstance(value, (int, float, D)) and not isinstance(value, bool) else type(value)


lookalikes = (
    finite_numbers
    | st.text(max_size=8)
    | st.builds(str, finite_numbers)
    | st.fixed_dictionaries({"__ic__": st.sampled_from(["decimal", "dict"]), "v": st.builds(str, finite_numbers)})
)


@settings(max_examples=1000, deadline=None)
@given(one=lookalikes, other=lookalikes)
def test_values_give_one_key_exactly_when_they_are_equal_values_of_one_kind(one, other):
    # int, float and Decimal are one kind; a string or a dict that spells a number is not that number.
    assert (canonical_json(one) == canonical_json(other)) == (_kind(one) == _kind(other) and one == other)


@settings(max_examples=300, deadline=None)
@given(number=finite_numbers)
def test_the_key_text_of_a_number_is_its_exact_value(number):
    parsed = json.loads(canonical_json(number))
    assert (D(parsed["v"]) if isinstance(parsed, dict) else parsed) == number


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ([1, 1.0, D("1"), D("1.00"), D("1E+0"), D("0.1E+1")], "1"),
        ([0, 0.0, -0.0, D("0"), D("-0"), D("0E-9")], "0"),
        ([0.5, D("0.5"), D("0.500")], "0.5"),
        ([D("30.50"), 30.5], "30.5"),
        ([D("-1E+3"), -1000, -1000.0], "-1000"),
        ([0.1, D(0.1)], "0.1"),
        ([1e-07, D(1e-07)], "1e-07"),
        ([2.0**70, 2**70, D(2**70)], "1180591620717411303424"),
        ([float("inf"), D("Infinity")], "Infinity"),
        ([float("nan"), D("NaN")], "NaN"),
        ([D("0.1"), D("0.100")], '{"__ic__":"decimal","v":"0.1"}'),
        ([D("-19.990")], '{"__ic__":"decimal","v":"-19.99"}'),
        ([D("1E-7"), D("0.0000001")], '{"__ic__":"decimal","v":"1e-7"}'),
        ([D("0.000001")], '{"__ic__":"decimal","v":"0.000001"}'),
        ([D("-1.25E-10")], '{"__ic__":"decimal","v":"-1.25e-10"}'),
    ],
)
def test_number_spellings(values, text):
    assert {canonical_json(v) for v in values} == {text}


def test_a_float_is_its_binary_value_so_it_differs_from_a_decimal_it_rounds():
    assert canonical_json(0.1) == canonical_json(D(0.1)) != canonical_json(D("0.1"))
    assert canonical_json(D("0.5")) == canonical_json(0.5) != canonical_json("0.5")


def test_a_dict_spelling_a_tagged_number_is_not_that_number():
    lookalike = {"__ic__": "decimal", "v": "0.1"}
    assert canonical_json(lookalike) != canonical_json(D("0.1"))
    assert canonical_json(lookalike) == canonical_json({"v": "0.1", "__ic__": "decimal"})


def test_numbers_as_dict_keys_are_keyed_by_value_too():
    # ... each written as itself, the dict tagged: {10: "a"} is not {"10": "a"}.
    tagged = '{"__ic__":"dict","v":[[1,"a"],[2,"b"]]}'
    assert canonical_json({1.0: "a", 2: "b"}) == canonical_json({1: "a", D("2.0"): "b"}) == tagged
    assert canonical_json({10: "a", 9: "b"}) != canonical_json({"10": "a", "9": "b"})
    assert canonical_json({None: 1, True: 2}) == '{"__ic__":"dict","v":[[null,1],[true,2]]}'


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (D("sNaN"), ValueError),
        ({float("nan"): "a", D("NaN"): "b"}, ValueError),  # unequal keys, both written NaN
        ({(1, 2): "a"}, TypeError),
        (D("1E+5000"), ValueError),
        (_nested(100_000), ValueError),
        (_cycles()[0], ValueError),
        (_cycles()[1], ValueError),
        (object(), TypeError),
    ],
    ids=["snan", "duplicate-key", "tuple-key", "huge", "deep", "cyclic-list", "cyclic-dict", "object"],
)
def test_what_cannot_be_a_key_is_a_type_or_value_error(value, error):
    with pytest.raises(error):
        canonical_json(value)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=8))
def test_strings_are_hashed_as_given_not_normalised(text):
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert (canonical_json(nfc) == canonical_json(nfd)) == (nfc == nfd)
    assert canonical_json({"k": nfc}) == json.dumps({"k": nfc}, ensure_ascii=False, separators=(",", ":"))


def test_nfc_and_nfd_spellings_are_different_keys():
    assert canonical_json("caf\u00e9") != canonical_json("cafe\u0301")


@settings(max_examples=300, deadline=None)
@given(one=texts, other=texts)
def test_strings_with_lone_surrogates_make_utf8_keys_that_stay_distinct(one, other):
    canonical_json(one).encode("utf-8")
    canonical_json({one: [other]}).encode("utf-8")
    assert (canonical_json(one) == canonical_json(other)) == (one == other)


def test_a_lone_surrogate_key_differs_from_its_escape_spelled_out():
    assert canonical_json("\ud83d") == '"\\ud83d"'
    assert canonical_json("\\ud83d") == '"\\\\ud83d"'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": {2, 1}, "a": frozenset({"y", "x"})}, '{"a":["x","y"],"b":[1,2]}'),
        ((1, (2, 3)), "[1,[2,3]]"),
        (b"\x00\xff", '"AP8="'),
        (dt.date(2024, 1, 2), '"2024-01-02"'),
        (dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.timezone.utc), '"2024-01-02T03:04:00+00:00"'),
    ],
)
def test_other_key_types_keep_their_former_form(value, text):
    assert canonical_json(value) == text


def test_a_type_json_cannot_hold_is_a_type_error_as_before():
    with pytest.raises(TypeError, match="UUID is not JSON serializable"):
        canonical_json(uuid.UUID(int=0))
