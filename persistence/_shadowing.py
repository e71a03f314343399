"""What both packages' faces run at import: the shadowing check, and public names imported on first use.

The check refuses a module of the user's that shadows ``consumer`` or ``persistence``, before anything imports it.

idempotent-consumer installs two top-level packages, ``consumer`` and ``persistence``: names that a user's own file
or folder in a Lambda function's root (``consumer.py``, ``persistence/``) can take. Python then imports the user's
(the function's root comes first on ``sys.path``), with an error that does not say why. Both packages check the
other with this module: ``persistence`` never imports ``consumer``, and ``consumer/_shadowing.py`` loads it from its
file, before anything imports ``persistence``. Both packages (and the observability wing) import a few public names
only when they are first used (:func:`imported_on_first_use`); this module is loaded by either package first.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

_HOME = Path(__file__).parent.parent  # the directory that holds both packages (not resolved: a stat per part)


def refuse_shadowed(name: str) -> None:
    """Raise if the top-level module ``name`` is not this package's sibling: a user's file or folder shadows it.

    Costs a ``sys.modules`` lookup when ``name`` is already imported, else one ``find_spec``: the module found is
    not run.

    Args:
        name: ``consumer`` or ``persistence``: the other package of this distribution.

    Raises:
        ImportError: ``name`` resolves to another file or folder; the message names it and the fix.
    """
    module = sys.modules.get(name)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None and spec.has_location else None
    if not origin:  # a namespace package, a built-in, or nothing at all: no file of the user's to name
        return
    found = Path(origin)
    if found.name.startswith("__init__."):
        found = found.parent
    ours = _HOME / name
    if found != ours and not _same(found, ours):
        raise ImportError(shadowing_message(name, found, ours), name=name, path=str(found))


def imported_on_first_use(
    namespace: dict[str, Any], names: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562): each name of ``names`` imports its module on first use.

    ``namespace`` is the package's ``globals()``: a name once imported is put there, so later uses find it without
    coming back to ``__getattr__``, which refuses a name not in ``names`` as Python would.
    """
    package = namespace["__name__"]

    def get_attribute(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def names_of_package() -> list[str]:
        return sorted({*namespace, *names})

    return get_attribute, names_of_package


def shadowing_message(name: str, found: Path, ours: Path) -> str:
    """The one message for a shadowed package: which file or folder shadows it, and the fix.

    Args:
        name: The shadowed package, ``consumer`` or ``persistence``.
        found: The user's file or folder that Python imports as ``name``.
        ours: Where idempotent-consumer's package ``name`` is.

    Returns:
        The message.
    """
    kind = "folder" if found.is_dir() else "file"
    return (
        f"your {kind} {found} shadows the package {name!r} of idempotent-consumer ({ours}): Python imports yours "
        f"instead, as its directory comes first on sys.path (a Lambda function's root does). Rename your {kind} "
        "(any other name will do), and the imports and the Lambda handler setting that name it."
    )


def _same(found: Path, ours: Path) -> bool:
    """Whether two spellings are one file or folder (a symbolic link, a case-insensitive file system)."""
    try:
        return found.samefile(ours)
    except OSError:
        return False
