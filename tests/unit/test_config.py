"""IdempotencyConfig is validated on construction, frozen, and slotted."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from consumer import IdempotencyConfig, IdempotencyConfigError, PowertoolsCutover, idempotent_function, make_key
from persistence import IdempotencyRecord, RecordStatus, SQLitePersistenceLayer


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"event_key_jmespath": "body.[unclosed"}, "event_key_jmespath 'body.\\[unclosed' is not valid JMESPath"),
        ({"payload_validation_jmespath": "a..b"}, r"^payload_validation_jmespath 'a\.\.b' is not valid JMESPath"),
        ({"hash_function": "md6"}, "hash_function 'md6' is not available here"),
        ({"expires_after_seconds": 0}, "expires_after_seconds must be positive"),
        ({"lock_timeout_seconds": -5}, "lock_timeout_seconds must be positive"),
        ({"local_cache_max_items": 0}, "local_cache_max_items must be positive"),
        ({"lock_grace_ms": -1}, "lock_grace_ms must not be negative"),
        ({"expires_after_seconds": 10**20}, "expires_after_seconds must be at most 3153600000 \\(100 years\\)"),
        ({"lock_timeout_seconds": 3153600001}, "lock_timeout_seconds must be at most 3153600000"),
        ({"local_cache_max_age_seconds": 2**63}, "local_cache_max_age_seconds must be at most 3153600000"),
        ({"key_prefix": ""}, "key_prefix must not be empty"),
    ],
)
def test_bad_configuration_fails_at_construction(options, message):
    with pytest.raises(IdempotencyConfigError, match=message):
        IdempotencyConfig(**options)


def test_config_errors_are_value_errors():
    with pytest.raises(ValueError, match="JMESPath"):
        IdempotencyConfig(event_key_jmespath="[")


def test_defaults_match_the_design():
    config = IdempotencyConfig()
    assert (config.expires_after_seconds, config.lock_timeout_seconds, config.lock_grace_ms) == (3600, 60, 1000)
    assert (config.hash_function, config.use_local_cache, config.local_cache_max_items) == ("sha256", False, 256)
    assert config.raise_on_no_idempotency_key is True  # a missing selection fails: never a fourth ending
    assert config.local_caches is None


def test_config_is_frozen_and_slotted():
    config = IdempotencyConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.expires_after_seconds = 1  # type: ignore[misc]
    assert not hasattr(config, "__dict__")


def test_prefix_defaults_to_the_function_name_then_local(monkeypatch):
    assert IdempotencyConfig().prefix == "local"
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "payments")
    assert IdempotencyConfig().prefix == "payments"
    assert IdempotencyConfig(key_prefix="orders").prefix == "orders"


def test_expressions_are_compiled_once():
    config = IdempotencyConfig(event_key_jmespath="messageId", payload_validation_jmespath="body")
    assert config.key_expression.expression == "messageId"
    assert config.validation_expression.expression == "body"


def test_a_hash_whose_collisions_can_be_made_is_warned_of_once_per_process_and_name(monkeypatch, caplog):
    monkeypatch.setattr("consumer.config._warned", set())
    cutover = PowertoolsCutover(
        table_name="pt", until=dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc), key_prefix="p", hash_function="md5"
    )
    with caplog.at_level("WARNING", "idempotent_consumer"):
        IdempotencyConfig(powertools_cutover=cutover)  # finding Powertools' records by its md5 keys: no warning
        assert caplog.records == []
        for name in ("md5", "sha1", "md5", "SHA1", "sha256", "blake2b", "sha1"):
            IdempotencyConfig(hash_function=name)
    said = [r.getMessage() for r in caplog.records]
    assert [s.split(":")[0] for s in said] == ["hash_function 'md5'", "hash_function 'sha1'"]
    assert all("collisions of it can be made on purpose" in s and s.endswith("use sha256") for s in said)


POSITIVE = ("expires_after_seconds", "local_cache_max_items", "local_cache_max_age_seconds", "lock_timeout_seconds",
            "max_decoded_bytes")  # fmt: skip


@pytest.mark.parametrize("name", POSITIVE)
def test_a_count_or_a_duration_takes_any_positive_value_and_refuses_zero_by_name(name):
    assert getattr(IdempotencyConfig(**{name: 1}), name) == 1
    with pytest.raises(IdempotencyConfigError) as refused:
        IdempotencyConfig(**{name: 0})
    assert str(refused.value) == f"{name} must be positive, got 0"


def test_the_lock_grace_may_be_zero_but_not_negative():
    assert IdempotencyConfig(lock_grace_ms=0).lock_grace_ms == 0
    with pytest.raises(IdempotencyConfigError) as refused:
        IdempotencyConfig(lock_grace_ms=-1)
    assert str(refused.value) == "lock_grace_ms must not be negative, got -1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key_prefix": ""}, "key_prefix must not be empty (use None for the default)"),
        (
            {"key_header": "Idempotency-Key", "event_key_jmespath": "messageId"},
            "key_header and event_key_jmespath both select the key: give one (header(@, 'name') in an expression)",
        ),
        ({"key_header": ""}, "key_header must be a header name (no surrounding spaces), got ''"),
        (
            {"key_header": " Idempotency-Key"},
            "key_header must be a header name (no surrounding spaces), got ' Idempotency-Key'",
        ),
    ],
)
def test_a_refused_option_is_named_with_what_to_give_instead(options, message):
    with pytest.raises(IdempotencyConfigError) as refused:
        IdempotencyConfig(**options)
    assert str(refused.value) == message


def test_a_key_header_whose_name_holds_a_backtick_selects_that_header():
    config = IdempotencyConfig(key_header="order`key")
    record = {"messageId": "m-1", "messageAttributes": {"order`key": {"stringValue": "o-1", "dataType": "String"}}}
    assert make_key(record, config) == make_key("o-1", IdempotencyConfig())


def test_a_cached_record_is_trusted_for_its_max_age_to_the_millisecond():
    config = IdempotencyConfig(use_local_cache=True, local_cache_max_age_seconds=30)
    cache, at = config.cache_for(object()), 1_700_000_000_000
    record = IdempotencyRecord("k", RecordStatus.COMPLETE, expires_at=at // 1000 + 3600, lease="l", response="1")
    cache.put(record, at)
    assert cache.get("k", at + 30_000) is record
    assert cache.get("k", at + 30_001) is None  # and dropped: the store is asked again
    assert len(cache) == 0


def test_config_is_shown_compared_and_hashed_by_its_fields_as_a_dataclass_is():
    config = IdempotencyConfig(event_key_jmespath="messageId", use_local_cache=True)
    assert repr(config).startswith("IdempotencyConfig(event_key_jmespath='messageId', payload_validation_jmespath=None")
    assert "key_expression" not in repr(config)  # what it compiles is not shown, nor compared
    same = IdempotencyConfig(event_key_jmespath="messageId", use_local_cache=True)
    assert config == same
    assert hash(config) == hash(same)
    assert config.local_caches is not same.local_caches
    assert config != dataclasses.replace(config, lock_grace_ms=5)
    assert config != "IdempotencyConfig"
    assert len({config, same, IdempotencyConfig()}) == 2


def test_the_longest_expiry_allowed_commits_and_replays_on_a_sqlite_file(tmp_path):
    store = SQLitePersistenceLayer(str(tmp_path / "o.db"))
    config = IdempotencyConfig(expires_after_seconds=100 * 365 * 24 * 3600)
    runs = []

    @idempotent_function(data_keyword_argument="order", store=store, config=config)
    def charge(order):
        runs.append(order["id"])
        return {"charged": order["id"]}

    assert charge(order={"id": 1}) == charge(order={"id": 1}) == {"charged": 1}
    assert runs == [1]
