"""Redis store URLs: what the store reads from them, what redis-py is given, and the client built from them.

Everything a URL can get wrong is found when the store is built, before the first record: the scheme, a flag that
is neither true nor false, an option neither the store nor redis-py knows (redis-py would accept it and fail
every connection with a ``TypeError``). Messages show the URL without its password.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: A client built from a URL retries a failed connection this many times, 10 ms apart and doubling up to 1 s
#: (with jitter): what redis-py gives a client built with ``Redis(host=...)``.
RETRIES, RETRY_BASE_SECONDS, RETRY_CAP_SECONDS = 10, 0.01, 1.0

_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
_SCHEMES = {"redis": "redis", "valkey": "redis", "rediss": "rediss", "valkeys": "rediss"}
_STORE_FLAGS = ("cluster", "allow_eviction")
_PASSWORD_OPTION = re.compile(r"(?P<name>[?&]password=)[^&#]*", re.IGNORECASE)  # redis-py takes one in the query
_IN_CLEAR_WARNED: set[str] = set()  # the URLs warned of in this process
_IN_CLEAR_LOCK = threading.Lock()
logger = logging.getLogger("idempotent_consumer")  # the library's one logger (its name, not an import of it)
_MISSING_CLIENT = (
    "the Redis store needs redis-py to build a client from a URL: pip install 'idempotent-consumer[redis]'"
)


@dataclass(frozen=True, slots=True)
class RedisURL:
    """A store URL split into what redis-py reads and this store's own options.

    Attributes:
        plain: The URL redis-py is given (the store's own options removed, the rest encoded as it came).
        cluster: ``?cluster=true``: build a ``RedisCluster``.
        allow_eviction: ``?allow_eviction=true``: accept a server that may evict keys.
    """

    plain: str
    cluster: bool
    allow_eviction: bool


def redacted(url: str) -> str:
    """``url`` with its passwords replaced by ``***``, for messages: any text, a URL or not.

    The password of its authority (``redis://user:***@host``), also in text that does not parse as a URL (a
    typo: ``rediss//:***@host``, a password holding a ``/``), and a ``password`` option (``?password=***``).
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL at all (an unbalanced "[" in the host): masked as text, below
        password = None
    if password is not None:
        user, _, host = parts.netloc.rpartition("@")
        url = urlunsplit(parts._replace(netloc=f"{user.partition(':')[0]}:***@{host}"))
    else:
        url = _masked_userinfo(url)
    return _PASSWORD_OPTION.sub(r"\g<name>***", url)


def _masked_userinfo(text: str) -> str:
    """``text`` with what lies between the ``:`` after its user name and its last ``@`` masked.

    The user name starts after the first ``//`` (or at the start): the password may hold ``/``, ``//`` or ``@``.
    """
    at = text.rfind("@")
    slashes = text.find("//", 0, max(at, 0))
    colon = text.find(":", 0 if slashes < 0 else slashes + 2, max(at, 0))
    return text if at < 0 or colon < 0 else f"{text[: colon + 1]}***{text[at:]}"


def refuse_misread_authority(url: str) -> None:
    """Refuse a URL holding an ``@`` that its parsed host does not account for, or a fragment.

    A URL's authority (``user:password@host:port``) ends at its first ``/``, ``?`` or ``#``: a password holding one
    of them unescaped is cut there, and the rest of it, its ``@`` and the intended host are read as a path, options
    or a fragment. The URL then names another host, often the user name (``redis://user:1234/5@good.example`` is
    host ``user``, port 1234, no password; ``redis://default:1234?password=tail@good.example`` sends
    ``tail@good.example`` as the password to host ``default``). Whatever the cut, its ``@`` lands past the
    authority, where no Redis URL has one: any ``@`` past the authority is refused (an option value's is written
    ``%40``), and so is any ``#`` (no Redis URL has a fragment; one cuts a ``?password=`` silently). An ``@`` inside
    the authority is the parsed host's: the last one ends the password, for redis-py as for this check.

    Raises:
        ValueError: Naming the fix, the URL masked as text (up to its last ``@``).
    """
    scheme_end = url.find("://")
    after = "" if scheme_end < 0 else url[scheme_end + 3 :]
    cut = re.search(r"[/?#]", after)
    past_authority = "" if cut is None else after[cut.start() :]
    try:
        urlsplit(url)
    except ValueError:  # an unbalanced "[" or "]": no host parsed at all, so any "@" is unaccounted for
        past_authority = url
    if "@" in past_authority or "#" in url:
        masked = _PASSWORD_OPTION.sub(r"\g<name>***", _masked_userinfo(url))  # as text: its last "@" ends it
        msg = (
            f"store URL {masked!r} holds an '@' or '#' past its host: percent-encode '/', '?', '#' and '@' in a "
            "password (%2F, %3F, %23, %40), and '@' or '#' in an option value"
        )
        raise ValueError(msg)


def parse_url(url: str) -> RedisURL:
    """Split and check a ``redis://``, ``rediss://``, ``valkey://`` or ``valkeys://`` URL.

    Raises:
        ValueError: Another scheme, a flag that is neither true nor false, an option neither the store nor
            redis-py knows, or an ``@`` or ``#`` past the host (see :func:`refuse_misread_authority`).
        ImportError: redis-py is not installed.
    """
    refuse_misread_authority(url)
    parts = urlsplit(url)
    scheme = _SCHEMES.get(parts.scheme)
    if scheme is None:
        msg = f"store URL {redacted(url)!r}: a Redis URL starts with redis://, rediss://, valkey:// or valkeys://"
        raise ValueError(msg)
    query = parse_qsl(parts.query, keep_blank_values=True)
    flags = {}
    for option in _STORE_FLAGS:
        values = [value.lower() for name, value in query if name == option]
        if values and values[-1] not in _FLAGS:
            msg = f"store URL {redacted(url)!r}: {option} must be true or false, not {values[-1]!r}"
            raise ValueError(msg)
        flags[option] = bool(values) and _FLAGS[values[-1]]
    rest = [(name, value) for name, value in query if name not in _STORE_FLAGS]
    unknown = sorted({name for name, _ in rest} - _client_options(tls=scheme == "rediss", cluster=flags["cluster"]))
    if unknown:
        named = [name for name in unknown if name.isidentifier()]  # no other is an option: not shown (a password?)
        odd = f" and {len(unknown) - len(named)} that no option is named like" if len(named) < len(unknown) else ""
        msg = (
            f"store URL {redacted(url)!r}: unknown options {named}{odd}; the store's own are {list(_STORE_FLAGS)}, "
            "the others are redis-py's connection options (percent-encode reserved characters of a password)"
        )
        raise ValueError(msg)
    if scheme == "redis" and (parts.password or any(name == "password" and value for name, value in rest)):
        _warn_in_clear(url, parts.hostname or "localhost")  # redis-py's host when the URL names none
    plain = urlunsplit((scheme, parts.netloc, parts.path, urlencode(rest), ""))  # encoded as it came
    return RedisURL(plain, **flags)


def _warn_in_clear(url: str, host: str) -> None:
    """Warn, once per URL and process, that a password goes to a host that is not this one without TLS.

    The ``AUTH`` and every stored response then cross the network in clear. A warning, not a refusal: a private
    network may be what the operator trusts. Logged (the library's logger, as every warning of it), so it reaches
    the function's logs in their format, where ``warnings`` would write raw text to stderr.
    """
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: not known to be this host
        loopback = False
    with _IN_CLEAR_LOCK:
        if loopback or url in _IN_CLEAR_WARNED:
            return
        _IN_CLEAR_WARNED.add(url)
    logger.warning(
        "store URL %r sends its password, and every stored response, to %s in clear: use rediss:// (TLS)",
        redacted(url),
        host,
    )


def _client_options(*, tls: bool, cluster: bool) -> set[str]:
    """The keyword arguments a client built from a URL takes: its pool's, its connections', a cluster's."""
    try:
        from redis.cluster import RedisCluster  # noqa: PLC0415 - the optional dependency
        from redis.connection import Connection, ConnectionPool, SSLConnection  # noqa: PLC0415
    except ImportError as e:
        raise ImportError(_MISSING_CLIENT) from e
    classes: list[type] = [ConnectionPool, SSLConnection if tls else Connection]
    if cluster:
        classes.append(RedisCluster)
    inits = [vars(klass).get("__init__") for cls in classes for klass in cls.__mro__ if klass is not object]
    names = {name for init in inits if init is not None for name in inspect.signature(init).parameters}
    return names - {"self", "args", "kwargs"} | {"db"}


def client_from_url(url: str) -> Any:
    """A redis-py client for a ``redis://``, ``rediss://``, ``valkey://`` or ``valkeys://`` URL.

    ``?cluster=true`` makes a ``RedisCluster`` (the URL names any one node); ``?allow_eviction=`` is the store's
    and not passed on; the other query options are redis-py's own. Connection errors and timeouts are retried
    (``RETRIES``), as redis-py does for a client built with ``Redis(host=...)``: every script of the store is
    safe to send again.

    Raises:
        ValueError: See :func:`parse_url`.
        ImportError: redis-py is not installed (``pip install 'idempotent-consumer[redis]'``).
    """
    parsed = parse_url(url)
    import redis  # noqa: PLC0415 - the optional dependency (parse_url found it)
    from redis.backoff import ExponentialWithJitterBackoff  # noqa: PLC0415
    from redis.cluster import RedisCluster  # noqa: PLC0415
    from redis.retry import Retry  # noqa: PLC0415

    # from_url connections retry nothing, unlike a client built with Redis(host=...): a reset connection during a
    # commit would fail a record whose body ran. Every script is safe to send again (a retry finds its own lease).
    retry = Retry(ExponentialWithJitterBackoff(base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS), RETRIES)
    if parsed.cluster:
        return RedisCluster.from_url(parsed.plain, retry=retry)
    return redis.Redis.from_url(parsed.plain, retry=retry)
