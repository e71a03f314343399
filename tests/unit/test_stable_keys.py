"""An explicit key prefix on ``@idempotent_function`` is the whole prefix: records survive renaming and moving.

The functions live in real modules written to a temporary directory and imported, as an application's would be.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from consumer import IdempotencyConfig, idempotent_function, make_key
from persistence import InMemoryPersistenceLayer, SQLitePersistenceLayer

STORE = "STORE = __import__('persistence').SQLitePersistenceLayer(__import__('os').environ['STABLE_KEYS_DB'])\n"


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Write modules into a package on ``sys.path``; ``load(name, source)`` imports one (anew each time)."""
    database = tmp_path / "records.sqlite3"
    monkeypatch.setenv("STABLE_KEYS_DB", str(database))
    package = tmp_path / "app_stable_keys"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(name, source):
        (package / f"{name}.py").write_text("from consumer import IdempotencyConfig, idempotent_function\n" + STORE)
        with (package / f"{name}.py").open("a") as file:
            file.write(textwrap.dedent(source))
        sys.modules.pop(f"app_stable_keys.{name}", None)
        return importlib.import_module(f"app_stable_keys.{name}")

    yield load
    for name in [m for m in sys.modules if m.startswith("app_stable_keys")]:
        del sys.modules[name]


CHARGE = """
ran = []

@idempotent_function(data_keyword_argument="order", persistence_store=STORE, key_prefix="payments")
def {name}(order):
    ran.append(order["id"])
    return {{"charged": order["amount"], "by": __name__}}
"""


def test_two_functions_in_different_modules_with_one_key_prefix_share_a_record(modules):
    billing = modules("billing", CHARGE.format(name="charge"))
    checkout = modules("checkout", CHARGE.format(name="take_payment"))
    order = {"id": 7, "amount": 30}
    assert billing.charge(order=order) == {"charged": 30, "by": "app_stable_keys.billing"}
    assert checkout.take_payment(order=order) == {"charged": 30, "by": "app_stable_keys.billing"}  # a replay
    assert (billing.ran, checkout.ran) == ([7], [])
    keys = [r.key for r in billing.STORE.scan()]
    assert keys == [make_key(order, IdempotencyConfig(), "payments")]
    assert keys[0].startswith("payments#")  # used exactly: no module, no function name


def test_renaming_and_moving_a_function_keeps_its_records(modules):
    old = modules("orders", CHARGE.format(name="charge"))
    assert old.charge(order={"id": 1, "amount": 5}) == {"charged": 5, "by": "app_stable_keys.orders"}
    # The next release: the function is renamed and moved to another module; the redelivered order replays.
    new = modules("payments_v2", CHARGE.format(name="capture_payment"))
    assert new.capture_payment(order={"id": 1, "amount": 5}) == {"charged": 5, "by": "app_stable_keys.orders"}
    assert new.ran == []


def test_the_configs_key_prefix_is_used_exactly_too(modules):
    source = """
    CONFIG = IdempotencyConfig(event_key_jmespath="id", key_prefix="shipping")
    ran = []

    @idempotent_function(data_keyword_argument="parcel", store=STORE, config=CONFIG)
    def {name}(parcel):
        ran.append(parcel["id"])
        return "shipped"
    """
    first = modules("ship_v1", source.format(name="ship"))
    second = modules("ship_v2", source.format(name="dispatch"))
    assert (first.ship(parcel={"id": "p-1"}), second.dispatch(parcel={"id": "p-1"})) == ("shipped", "shipped")
    assert (first.ran, second.ran) == (["p-1"], [])
    assert [r.key for r in first.STORE.scan()] == [make_key("p-1", IdempotencyConfig(), "shipping")]


def test_without_an_explicit_prefix_functions_keep_records_of_their_own(modules):
    source = """
    ran = []

    @idempotent_function(data_keyword_argument="order", store=STORE)
    def charge(order):
        ran.append(order["id"])
        return __name__
    """
    first, second = modules("shop_a", source), modules("shop_b", source)
    assert (first.charge(order={"id": 1}), second.charge(order={"id": 1})) == (
        "app_stable_keys.shop_a",
        "app_stable_keys.shop_b",
    )
    assert (first.ran, second.ran) == ([1], [1])
    assert sorted(r.key.split("#")[0] for r in first.STORE.scan()) == [
        "local.app_stable_keys.shop_a.charge",
        "local.app_stable_keys.shop_b.charge",
    ]


def test_the_decorators_key_prefix_wins_over_the_configs(tmp_path):
    store = SQLitePersistenceLayer(str(tmp_path / "r.sqlite3"))
    config = IdempotencyConfig(key_prefix="from-config")
    idempotent_function(data_keyword_argument="x", store=store, config=config, key_prefix="from-decorator")(
        lambda x: x
    )(x={"id": 1})
    assert [r.key.split("#")[0] for r in store.scan()] == ["from-decorator"]


def test_functions_one_factory_makes_may_share_an_explicit_prefix_without_a_name(tmp_path):
    store, ran = SQLitePersistenceLayer(str(tmp_path / "r.sqlite3")), []

    def make_step(channel):
        @idempotent_function(data_keyword_argument="order", store=store, key_prefix=f"notify-{channel}")
        def notify(order):
            ran.append(channel)

        return notify

    email, sms = make_step("email"), make_step("sms")  # no "two live functions" refusal: the name is not in the key
    email(order={"id": 1})
    sms(order={"id": 1})
    email(order={"id": 1})
    assert ran == ["email", "sms"]


def test_a_name_and_an_explicit_prefix_together_are_refused():
    store = InMemoryPersistenceLayer()
    with pytest.raises(TypeError, match="whole prefix"):
        idempotent_function(data_keyword_argument="x", store=store, name="n", key_prefix="p")
    with pytest.raises(TypeError, match="whole prefix"):
        idempotent_function(data_keyword_argument="x", store=store, name="n", config=IdempotencyConfig(key_prefix="p"))


# Keys as deployed functions hold them in their stores: a change to any of these runs every record delivered across
# the deploy once more. Plain JSON data keeps its key whatever is added for other values (a dict key that is no
# string, a tagged form). The stream defaults (with the stream's ARN) and a header-less record's own id under
# key_header (tagged) were changed on purpose in 0.1.0; pinned from then on.
ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
BODY = '{"order": {"id": 7, "lines": [{"sku": "a", "qty": 2.5}], "note": null, "ok": true, "1": "x"}}'
PINNED = [
    ({"messageId": "059f36b4-87a3-44ab-83d2-661975830a7d", "body": "{}"}, {},
     "c26380f3dfe7ddb3f0632128e40cacd7daaaec903c06107d12dfa521b411dff0"),
    ({"id": "e-7", "detail-type": "Booked", "detail": {}}, {},
     "c8d5189f72b784f596cd5c3b5b13ce273d1550516841d099f93e9b8584c7e656"),
    ({"eventSourceArn": "arn:aws:kafka:eu-west-1:1:cluster/c/u", "topic": "orders", "partition": 3, "offset": 41}, {},
     "8ce5ba8c6ed5d34e22f0b85878b22a7e23868cf383a5153fc62dbb87673d02a4"),
    ({"body": BODY}, {"event_key_jmespath": "powertools_json(body)"},
     "43c12107b035542dff506155b2e3dd8beb2e88f6233e292405047c58965034ec"),
    ({"body": '{"__ic__": "decimal", "v": "0.1"}'}, {"event_key_jmespath": "powertools_json(body)"},
     "e221f53dacfb8022143ff0cd090fe1c3c203799e356a32e03e98b559b9ac7c8a"),
    ({"messageId": "m-1", "messageAttributes": {"Idempotency-Key": {"stringValue": "k-1", "dataType": "String"}}},
     {"key_header": "Idempotency-Key"}, "f613e2ddb1ed1aefc2d87a1bc773c3a3e671f40809ffe8875486d58482e5259a"),
    ({"eventID": "shardId-000000000000:49590338271490256608559692538361571095921575989136588898",
      "eventSourceARN": ARN, "kinesis": {}}, {}, "605d4d818e7a32c02531a5ece63e756d1a499968886e5653aa692bea46b5fe48"),
    ({"messageId": "m-1", "messageAttributes": {}},
     {"key_header": "Idempotency-Key", "raise_on_no_idempotency_key": False},
     "e83294e4b33c9008347abeb44f1d6a082f5825302f84b6fb1102e458e2b81688"),
]  # fmt: skip


@pytest.mark.parametrize(("record", "options", "digest"), PINNED, ids=[
    "sqs", "eventbridge", "kafka", "json-body", "reserved-key-in-a-body", "header", "kinesis", "header-less",
])  # fmt: skip
def test_keys_of_deployed_records_stay_as_they_are(record, options, digest):
    assert make_key(record, IdempotencyConfig(key_prefix="p", **options)) == f"p#{digest}"
