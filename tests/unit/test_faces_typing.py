"""What ``mypy --strict`` sees of the async face in a user's code: a decorated ``async def`` stays a coroutine
function (its await gives the declared result, its un-awaited call is a ``Coroutine``), and the async processor's
response is the ``PartialBatchResponse`` TypedDict once awaited. Two mypy runs over files written to ``tmp_path``
(the second reuses the first one's cache)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]

USER_CODE = textwrap.dedent(
    """\
    import asyncio

    from consumer import (
        AsyncBatchProcessor,
        EventType,
        PartialBatchResponse,
        SQSRecord,
        async_process_partial_response,
        idempotent,
        idempotent_function,
    )
    from persistence import InMemoryPersistenceLayer

    store = InMemoryPersistenceLayer()


    @idempotent_function(data_keyword_argument="order", store=store)
    async def charge(order: dict[str, int]) -> int:
        await asyncio.sleep(0)
        return order["amount"]


    @idempotent(store=store)
    async def handler(event: dict[str, str], context: object) -> str:
        return event["id"]


    async def record_handler(record: SQSRecord) -> int:
        return await charge(order={"amount": len(record.body)})


    async def main() -> PartialBatchResponse:
        amount: int = await charge(order={"amount": 1})
        booked: str = await handler({"id": str(amount)}, None)
        reveal_type(charge)
        reveal_type(handler)
        reveal_type(await charge(order={"amount": len(booked)}))
        processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=4)
        response = await processor.process({"Records": []}, record_handler)
        reveal_type(response)
        return response


    def sync_handler(event: dict[str, list[object]], context: object) -> PartialBatchResponse:
        processor = AsyncBatchProcessor(EventType.SQS, store=store)
        return async_process_partial_response(event, record_handler, processor)  # Powertools' sync form
    """
)

MISUSE = textwrap.dedent(
    """\
    from consumer import AsyncBatchProcessor, EventType, PartialBatchResponse
    from persistence import InMemoryPersistenceLayer
    from user import charge, record_handler

    amount: int = charge(order={"amount": 1})
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    response: PartialBatchResponse = processor.process({"Records": []}, record_handler)
    """
)


def mypy(tmp_path: Path, name: str, source: str) -> tuple[int, list[str]]:
    """Write ``source`` to ``tmp_path/name`` and run ``mypy --strict`` on it; the exit status and output lines."""
    (tmp_path / name).write_text(source)
    command = [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10"]
    command += ["--cache-dir", str(tmp_path / ".mypy_cache"), "--no-color-output", name]
    env = {**os.environ, "MYPYPATH": str(REPOSITORY)}  # the editable install's import hook is invisible to mypy
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


def messages(output: list[str], name: str, line: int) -> list[str]:
    return [m for m in output if m.startswith(f"{name}:{line}: ")]


@pytest.fixture(scope="module")
def mypy_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, list[str]]]:
    tmp_path = tmp_path_factory.mktemp("typing")
    return {"user": mypy(tmp_path, "user.py", USER_CODE), "misuse": mypy(tmp_path, "misuse.py", MISUSE)}


def test_async_decorated_functions_and_the_async_processor_type_check(mypy_runs):
    status, output = mypy_runs["user"]
    assert status == 0, "\n".join(output)
    revealed = {
        text: messages(output, "user.py", line_of(USER_CODE, text))
        for text in ("reveal_type(charge)", "reveal_type(handler)", "reveal_type(await", "reveal_type(response)")
    }
    assert re.search(
        r'"def \(order: .*dict\[.*str, .*int\]\) -> .*Coroutine\[Any, Any, .*int\]"', revealed["reveal_type(charge)"][0]
    )
    assert re.search(r"-> .*Coroutine\[Any, Any, .*str\]\"", revealed["reveal_type(handler)"][0])
    assert re.search(r'Revealed type is "(builtins\.)?int"', revealed["reveal_type(await"][0])
    assert "PartialBatchResponse" in revealed["reveal_type(response)"][0]


def test_a_call_used_without_await_is_reported(mypy_runs):
    status, output = mypy_runs["misuse"]
    assert status == 1, "\n".join(output)
    errors = [m for m in output if ": error: " in m]
    assert len(errors) == 2, "\n".join(output)
    charged = messages(output, "misuse.py", line_of(MISUSE, "amount: int = charge("))
    awaited = messages(output, "misuse.py", line_of(MISUSE, "response: PartialBatchResponse ="))
    assert any('"Coroutine[Any, Any, int]"' in m and "[assignment]" in m for m in charged), "\n".join(output)
    assert any("Coroutine[Any, Any, PartialBatchResponse]" in m and "[assignment]" in m for m in awaited)
