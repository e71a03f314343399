"""Stand-ins for what the documented examples use besides idempotency and batch processing.

Powertools' Logger, Tracer and validator (a user moving over keeps them; the Tracer and validator need packages
the measure does not install), the HTTP clients the examples call (``requests``, ``httpx``: nothing reaches the
network) and the bit of pytest the documented tests use. Both runs of the measure, Powertools' and ours, use the
same stand-ins (:func:`install`), so what differs between the runs is the library under test alone.
"""

from __future__ import annotations

import functools
import json
import sys
import types
from typing import Any

#: What the examples logged, in order (cleared before each example).
LOGGED: list[Any] = []
#: The requests the examples sent, as ``(method, url, json)``.
SENT: list[tuple[str, str, Any]] = []


class Logger:
    """Records what is logged; ``inject_lambda_context`` is a decorator that changes nothing."""

    def info(self, message: Any, *_: Any, **__: Any) -> None:
        LOGGED.append(message)

    def exception(self, message: Any, *_: Any, **__: Any) -> None:
        LOGGED.append(("exception", message))

    def inject_lambda_context(self, handler: Any) -> Any:
        return handler


class Tracer:
    """Decorators that change nothing (``capture_method`` with or without its options)."""

    def capture_method(self, method: Any = None, **_: Any) -> Any:
        return method if method is not None else (lambda function: function)

    def capture_lambda_handler(self, handler: Any) -> Any:
        return handler


envelopes = types.SimpleNamespace(API_GATEWAY_HTTP="powertools_json(body)")


def validator(*, envelope: str, **_: Any) -> Any:
    """Unwraps the event as the API Gateway HTTP envelope does (the body, parsed); validates nothing."""
    if envelope != envelopes.API_GATEWAY_HTTP:
        raise NotImplementedError(envelope)

    def decorate(handler: Any) -> Any:
        @functools.wraps(handler)
        def wrapper(event: Any, context: Any) -> Any:
            return handler(json.loads(event["body"]), context)

        return wrapper

    return decorate


class _Response:
    status_code = 200

    def __init__(self, body: Any) -> None:
        self._body = body

    def json(self) -> Any:
        return self._body


def _post(url: str, json: Any = None, **_: Any) -> _Response:
    SENT.append(("POST", url, json))
    return _Response({"id": len(SENT), **(json or {})})


class _AsyncClient:
    async def __aenter__(self) -> _AsyncClient:  # noqa: PYI034 - a stand-in, never subclassed
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def get(self, url: str, **_: Any) -> _Response:
        SENT.append(("GET", url, None))
        return _Response({})


requests = types.ModuleType("requests")
requests.post = _post  # type: ignore[attr-defined]
requests.Response = _Response  # type: ignore[attr-defined]
httpx = types.ModuleType("httpx")
httpx.AsyncClient = _AsyncClient  # type: ignore[attr-defined]
pytest = types.ModuleType("pytest")
pytest.fixture = lambda function=None, **_: function or (lambda f: f)  # type: ignore[attr-defined]  # @fixture, @fixture()


class MonkeyPatch:
    """``monkeypatch.setenv`` as pytest's (a value is turned into text), undone by :meth:`undo`."""

    def __init__(self, environ: Any) -> None:
        self.environ, self.saved = environ, {}

    def setenv(self, name: str, value: Any) -> None:
        self.saved.setdefault(name, self.environ.get(name))
        self.environ[name] = str(value)

    def undo(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                self.environ.pop(name, None)
            else:
                self.environ[name] = value


def install() -> None:
    """Put the stand-ins where the examples import them from (before any example is loaded)."""
    for name, module in (("requests", requests), ("httpx", httpx), ("pytest", pytest)):
        sys.modules[name] = module
    import aws_lambda_powertools

    aws_lambda_powertools.Logger = Logger  # type: ignore[misc]
    aws_lambda_powertools.Tracer = Tracer  # type: ignore[misc]
    validation = types.ModuleType("aws_lambda_powertools.utilities.validation")
    validation.validator = validator  # type: ignore[attr-defined]
    validation.envelopes = envelopes  # type: ignore[attr-defined]
    sys.modules[validation.__name__] = validation
