"""The name-only shim: Powertools' idempotency and batch modules, answering with this library's names.

``install()`` makes every module under ``aws_lambda_powertools.utilities.idempotency`` and
``aws_lambda_powertools.utilities.batch`` (those two packages and any module below them) a module whose names are
ours, as ``docs/migrating-from-powertools.md`` maps them: a renamed one by the table below (``DataRecord`` is our
``IdempotencyRecord``), any other by the same name in ``consumer``, ``consumer.serialization`` or ``persistence``.
A name with no equivalent is missing, so importing it fails as it would for a user; under a test suite
(``install(placeholders=True)``) it imports as a placeholder that fails whatever uses it, so that one such import
fails the tests that use the name, not every test of the module. Nothing else is touched: the rest of Powertools
(its data classes, parser models, Logger) stays its own, and no behaviour of either library is patched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

PREFIXES = ("aws_lambda_powertools.utilities.idempotency", "aws_lambda_powertools.utilities.batch")

#: Powertools' name -> ``module:name`` here, where the two differ (the migration guide's tables).
RENAMED = {
    "DataRecord": "persistence:IdempotencyRecord",
    "RedisCachePersistenceLayer": "persistence.redis:RedisPersistenceLayer",
    "IdempotentHookFunction": "consumer:ResponseHook",
    "PartialItemFailureResponse": "consumer:PartialBatchResponse",
    "PartialItemFailures": "consumer.batch:BatchItemFailure",
}
#: Where a name Powertools and we share is looked up, in order.
SAME_NAME_IN = ("consumer", "consumer.serialization", "persistence")


def resolve(name: str) -> Any:
    """Our object for Powertools' ``name``.

    Raises:
        AttributeError: ``name`` has no equivalent here.
    """
    if name in RENAMED:
        module, _, attribute = RENAMED[name].partition(":")
        return getattr(importlib.import_module(module), attribute)
    for module in SAME_NAME_IN:
        found = getattr(importlib.import_module(module), name, None)
        if found is not None and not isinstance(found, types.ModuleType) and not name.startswith("_"):
            return found
    raise AttributeError(name)


class NoEquivalent:
    """Stands for a Powertools name that has no equivalent here: calling it, or making what subclasses it, fails."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _refuse(self) -> NotImplementedError:
        return NotImplementedError(f"{self._name} has no equivalent in idempotent-consumer")

    def __call__(self, *_: Any, **__: Any) -> Any:
        raise self._refuse()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        refuse = self._refuse

        def __init__(*_: Any, **__: Any) -> None:  # noqa: N807 - the base's constructor
            raise refuse()

        return (type(self._name.rpartition(".")[2], (), {"__init__": __init__}),)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{self._name}.{name}: {self._name} has no equivalent in idempotent-consumer")


class _Module(types.ModuleType):
    placeholders = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return resolve(name)
        except AttributeError:
            if self.placeholders:
                return NoEquivalent(f"{self.__name__}.{name}")
            msg = f"module {self.__name__!r} has no attribute {name!r} (no equivalent in idempotent-consumer)"
            raise AttributeError(msg) from None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the modules Powertools has under :data:`PREFIXES` (as its installed package lays them out)."""

    def __init__(self, powertools: Path) -> None:
        self.powertools = powertools

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:  # noqa: ARG002
        if not any(fullname == prefix or fullname.startswith(prefix + ".") for prefix in PREFIXES):
            return None
        where = self.powertools.joinpath(*fullname.split(".")[1:])
        if not (where.is_dir() or where.with_suffix(".py").is_file()):
            return None  # not a module of Powertools' either: the import fails as it would there
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []  # a package: its submodules are shimmed too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install(*, placeholders: bool = False) -> None:
    """Answer Powertools' idempotency and batch names with ours from now on (before they are imported).

    Args:
        placeholders: Import a name that has no equivalent as a :class:`NoEquivalent` instead of failing.
    """
    _Module.placeholders = placeholders
    import aws_lambda_powertools

    for name in [n for n in sys.modules if any(n == p or n.startswith(p + ".") for p in PREFIXES)]:
        del sys.modules[name]
    sys.meta_path.insert(0, _Finder(Path(aws_lambda_powertools.__file__).parent))
