"""Why a test of Powertools' that passes on Powertools fails here: its class and cause, from its source and failure.

Two classes. A test *cannot pass on another library* when it drives Powertools' internals: its DynamoDB requests are
``botocore`` stubs of Powertools' exact requests and item format, it calls Powertools' private names, it runs
Powertools' Redis layer on the Redis test double of Powertools' suite, or it expects a warning class of Powertools'
own. Otherwise it meets *a difference the migration guide lists*, each with its reason. The source rules come first
(a stubbed test stays one whatever fails first); then the failure's words. What no rule names is *unclassified*, to
be looked at.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

ANOTHER_LIBRARY = "cannot pass on another library"
LISTED = "a difference the migration guide lists"
UNCLASSIFIED = "unclassified"

#: (class, cause, pattern on the test's source: its function and the module-level functions it calls).
SOURCE_RULES = (
    (ANOTHER_LIBRARY, "botocore stubs of Powertools' DynamoDB requests and items", r"\bStubber\b"),
    (
        ANOTHER_LIBRARY,
        "Powertools' Redis layer on its Redis test double",
        r"MockRedis|redis_client|RedisCachePersistence",
    ),
    (
        ANOTHER_LIBRARY,
        "Powertools' private names",
        r"\b(IdempotencyHandler|_prepare_data|MAX_RETRIES)\b|persistence_store\.(configure|_\w+)|spy\(\w+, \"_",
    ),
    (ANOTHER_LIBRARY, "a warning class of Powertools' own", r"Powertools(User|Deprecation)Warning"),
)
#: (class, cause, pattern on the failure's text).
FAILURE_RULES = (
    (LISTED, "a user's own BasePersistenceLayer subclass: no adapter", r"BasePersistenceLayer has no equivalent"),
    (
        LISTED,
        "records after a failure on a stream, of its partition key, reported without running",
        r"not run: skipped, an earlier record|fail_messages[\s\S]*(KinesisRecord|DynamoDBStreamRecord)\(",
    ),
    (LISTED, "Kafka records handed to the block without their cluster", r"A Kafka record without its cluster"),
    (LISTED, "one live function per name", r"two live functions are both named"),
    (LISTED, "IdempotencyConfig is frozen", r"FrozenInstanceError"),
    (LISTED, "a message compared whole with Powertools'", r"assert 'No data foun|== 'no idempoten"),
    (LISTED, "a key selection that selects nothing fails the record", r"IdempotencyKeyError: no idempotency key"),
    (LISTED, "DataRecord built with Powertools' fields", r"IdempotencyRecord\.__init__\(\)"),
    (LISTED, "no per-record handler hooks (success_handler, failure_handler)", r"ExceptionInfo|FailureResponse"),
)


@cache
def _module(path: Path) -> tuple[str, dict[str, ast.AST]]:
    text = path.read_text()
    tree = ast.parse(text)
    functions: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions[f"{node.name}.{inner.name}"] = inner
    return text, functions


def source_of(repo: Path, test: str) -> str:
    """The source of ``test`` (``module.path[.Class]::name[param]``) and of the module's functions it calls."""
    dotted, _, name = test.partition("::")
    name = name.split("[", 1)[0]
    parts = dotted.split(".")
    for cut in (len(parts), len(parts) - 1):  # the last part may be a class
        path = repo.joinpath(*parts[:cut]).with_suffix(".py")
        if path.is_file():
            text, functions = _module(path)
            node = functions.get(".".join([*parts[cut:], name]))
            if node is None:
                return ""
            called = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            helpers = [functions[c] for c in sorted(called) if c in functions]
            return "\n".join(ast.get_source_segment(text, n) or "" for n in (node, *helpers))
    return ""


def cause_of(repo: Path, test: str, failure: str) -> tuple[str, str]:
    """``(class, cause)`` of a failing ``test`` whose failure says ``failure``."""
    if "/_redis/" in test.replace(".", "/"):
        return ANOTHER_LIBRARY, "Powertools' Redis layer on its Redis test double"
    source = source_of(repo, test)
    for rules, text in ((SOURCE_RULES, source), (FAILURE_RULES, failure)):
        for kind, cause, pattern in rules:
            if re.search(pattern, text):
                return kind, cause
    return UNCLASSIFIED, UNCLASSIFIED


def causes_table(repo: Path, failures: dict[str, str]) -> list[str]:
    """The failures by class and cause, counted; the unclassified ones named."""
    found: dict[tuple[str, str], list[str]] = {}
    for test, failure in sorted(failures.items()):
        found.setdefault(cause_of(repo, test, failure), []).append(test)
    lines = []
    for kind in (ANOTHER_LIBRARY, LISTED, UNCLASSIFIED):
        causes = {cause: tests for (k, cause), tests in found.items() if k == kind}
        if causes:
            lines.append(f"- {kind}: {sum(map(len, causes.values()))}")
            for cause, tests in sorted(causes.items(), key=lambda item: -len(item[1])):
                named = "" if kind == ANOTHER_LIBRARY else f": {', '.join(t.rpartition('::')[2] for t in tests)}"
                lines.append(f"  - {cause}: {len(tests)}{named}")
    return lines
