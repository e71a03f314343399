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
