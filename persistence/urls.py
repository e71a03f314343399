"""Stores named by URL (``sqlite:///path``, ``memory://``, ``dynamodb://TABLE?...``) for the CLI and samples."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, parse_qsl, unquote_plus, urlsplit

from persistence._redis_url import redacted, refuse_misread_authority
from persistence.dynamodb import DynamoDBPersistenceLayer
from persistence.memory import InMemoryPersistenceLayer
from persistence.sqlite import DEFAULT_PATH, SQLitePersistenceLayer

if TYPE_CHECKING:
    from persistence._base import PersistenceLayer

#: The environment variable a store URL is read from when none is given.
STORE_URL_VARIABLE = "IDEMPOTENCY_STORE_URL"
#: The store URL used when neither an argument nor the variable gives one: a SQLite file in the current directory.
DEFAULT_STORE_URL = f"sqlite:///{DEFAULT_PATH}"
_DYNAMODB_OPTIONS = {"sort_key_attr", "static_pk_value", "key_attr"}
_REDIS_SCHEMES = ("redis", "rediss", "valkey", "valkeys")
_SCHEMES = ("sqlite", "memory", "dynamodb", *_REDIS_SCHEMES)


def store_from_url(url: str | None = None) -> PersistenceLayer:
    """Build the store a URL names.

    Args:
        url: ``sqlite:///relative/path`` or ``sqlite:////absolute/path``; ``memory://``;
            ``dynamodb://TABLE`` with optional query ``endpoint_url``, ``region``, ``sort_key_attr``,
            ``static_pk_value``, ``key_attr``; ``redis://host:port/db`` (also ``rediss://``, ``valkey://``,
            ``valkeys://``) with optional query ``key_prefix`` and ``cluster=true``. ``None``: the
            ``IDEMPOTENCY_STORE_URL`` environment variable, else ``sqlite:///.idempotency.sqlite3``.

    Raises:
        ValueError: The URL names no store this library has, or has options it does not know. The message shows
            the URL with its password masked (``redis://:***@host``), even when the URL does not parse.

    Examples:
        >>> store_from_url("memory://").__class__.__name__
        'InMemoryPersistenceLayer'
        >>> store_from_url("sqlite:///data/idempotency.sqlite3").path.as_posix()
        'data/idempotency.sqlite3'
    """
    url = url or os.environ.get(STORE_URL_VARIABLE) or DEFAULT_STORE_URL
    try:
        parts = urlsplit(url)
    except ValueError as e:  # an unbalanced "[" or "]", in a host or in a password
        refuse_misread_authority(url)  # a password's: said as such, masked
        raise ValueError(f"store URL {redacted(url)!r} is not a URL: {e}") from None
    if parts.scheme == "memory":
        return InMemoryPersistenceLayer()
    if parts.scheme == "sqlite":
        path = parts.path.removeprefix("/")
        if not path:
            raise ValueError(
                f"store URL {redacted(url)!r} names no file: use sqlite:///relative/path or sqlite:////abs/path"
            )
        return SQLitePersistenceLayer(path)
    if parts.scheme == "dynamodb":
        return _dynamodb(url, parts.netloc, parse_qs(parts.query))
    if parts.scheme in _REDIS_SCHEMES:
        return _redis(url)
    schemes = f"{', '.join(_SCHEMES[:-1])} or {_SCHEMES[-1]}"
    raise ValueError(f"store URL {redacted(url)!r}: the scheme must be {schemes}")


def _dynamodb(url: str, table: str, query: dict[str, list[str]]) -> DynamoDBPersistenceLayer:
    if not table:
        raise ValueError(f"store URL {redacted(url)!r} names no table: use dynamodb://TABLE")
    options = {name: values[-1] for name, values in query.items()}
    unknown = set(options) - _DYNAMODB_OPTIONS - {"endpoint_url", "region"}
    if unknown:
        raise ValueError(f"store URL {redacted(url)!r}: unknown options {sorted(unknown)}")
    endpoint_url, region = options.pop("endpoint_url", None), options.pop("region", None)
    client = None
    if endpoint_url or region:
        import boto3  # noqa: PLC0415 - only when a DynamoDB store is asked for

        client = boto3.session.Session().client("dynamodb", endpoint_url=endpoint_url, region_name=region)
    return DynamoDBPersistenceLayer(
        table_name=table,
        boto3_client=client,
        key_attr=options.get("key_attr", "id"),
        sort_key_attr=options.get("sort_key_attr"),
        static_pk_value=options.get("static_pk_value"),
    )


def _redis(url: str) -> PersistenceLayer:
    from persistence.redis import RedisPersistenceLayer  # noqa: PLC0415 - the optional store, only when named

    refuse_misread_authority(url)  # before key_prefix is taken out: its value may hold the password's cut-off '@'
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)  # ?key_prefix= is an empty prefix, not the default
    prefixes = [value for name, value in query if name == "key_prefix"]
    # The other options as they came, unencoded and re-encoded never: a message about the URL masks its password.
    rest = "&".join(p for p in parts.query.split("&") if unquote_plus(p.partition("=")[0]) != "key_prefix")
    prefix = prefixes[-1] if prefixes else "idempotency:"
    return RedisPersistenceLayer(url=parts._replace(query=rest).geturl(), key_prefix=prefix)
