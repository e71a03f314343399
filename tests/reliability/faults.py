"""Fault injection into DynamoDB calls with a botocore ``before-send`` hook: the request never reaches the
server (throttling, server error, connection error) or reaches it and the answer is lost."""

from __future__ import annotations

import collections
import json
import random
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError
from botocore.httpsession import URLLib3Session
from dynamodb_local import canned_answer

KINDS = ("throttle", "server", "connection", "lost_response")
_ERRORS = {
    "throttle": (400, "ProvisionedThroughputExceededException"),
    "server": (500, "InternalServerError"),
    "lost_response": (500, "InternalServerError"),
}


def _error(request: Any, kind: str) -> AWSResponse:
    status, code = _ERRORS[kind]
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": f"injected {kind}"})
    return canned_answer(request.url, status, body.encode())


class FaultInjector:
    """Injects faults into one client's calls: planned (operation, kind, how many) or at random, seeded."""

    def __init__(self, client: Any, seed: int = 0) -> None:
        self.planned: dict[str, list[str]] = collections.defaultdict(list)
        self.probability = 0.0
        self.random_kinds: tuple[str, ...] = KINDS
        self.rng = random.Random(seed)
        self.injected: collections.Counter[tuple[str, str]] = collections.Counter()
        self._session = URLLib3Session()
        client.meta.events.register("before-send.dynamodb.*", self._before_send)

    def fail(self, operation: str, kind: str, times: int) -> None:
        """The next ``times`` attempts of ``operation`` (``PutItem``, ...) meet ``kind``."""
        self.planned[operation].extend([kind] * times)

    def randomly(self, probability: float, kinds: tuple[str, ...] = KINDS) -> None:
        """Every attempt meets a random ``kind`` with ``probability``."""
        self.probability, self.random_kinds = probability, kinds

    def _choose(self, operation: str) -> str | None:
        if self.planned[operation]:
            return self.planned[operation].pop(0)
        if self.probability and self.rng.random() < self.probability:
            return self.rng.choice(self.random_kinds)
        return None

    def _before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        kind = self._choose(operation)
        if kind is None:
            return None
        self.injected[(operation, kind)] += 1
        if kind == "connection":
            raise EndpointConnectionError(endpoint_url=request.url)
        if kind == "lost_response":
            self._session.send(request)  # the write happens; its answer never arrives
        return _error(request, kind)

    @property
    def total(self) -> int:
        return sum(self.injected.values())
