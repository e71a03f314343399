"""IdempotencyConfig is validated on construction, frozen, and slotted."""

from __future__ import annotations

import dataclasses

import pytest

from consumer import IdempotencyConfig, IdempotencyConfigError


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"event_key_jmespath": "body.[unclosed"}, "event_key_jmespath 'body.\\[unclosed' is not valid JMESPath"),
        ({"payload_validation_jmespath": "a..b"}, "payload_validation_jmespath"),
        ({"hash_function": "md6"}, "hash_function 'md6' is not available here"),
        ({"expires_after_seconds": 0}, "expires_after_seconds must be positive"),
        ({"lock_timeout_seconds": -5}, "lock_timeout_seconds must be positive"),
        ({"local_cache_max_items": 0}, "local_cache_max_items must be positive"),
        ({"lock_grace_ms": -1}, "lock_grace_ms must not be negative"),
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
