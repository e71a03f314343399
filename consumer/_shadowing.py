"""Refuse a module of the user's that shadows ``persistence`` (or, in ``invoke``, either package).

idempotent-consumer installs two top-level packages, ``consumer`` and ``persistence``: names that a user's own file
or folder in a Lambda function's root (``consumer.py``, ``persistence/``) can take. Python then imports the user's
(the function's root comes first on ``sys.path``), with an error that does not say why. ``consumer/__init__.py``
checks ``persistence`` before anything imports it (and ``persistence/__init__.py`` checks ``consumer`` with its own
copy of this check: it never imports ``consumer``; a unit test keeps the two copies identical). A user's
``consumer.py`` imported *instead of* ``consumer`` runs none of this package's code: ``idempotent-consumer invoke``
looks for one in the function's directory before it imports the handler (:func:`shadowing_in`).

Another installed distribution that ships a top-level ``consumer`` package of its own writes its files over ours
(pip does not warn): the command's entry point then finds a ``consumer/__init__.py`` that is not ours and says so
(:func:`clobbered_message`). A user's ``tests/consumer/__init__.py`` under pytest cannot be told apart from a
package of their own: docs/troubleshooting.md has it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

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


def shadowing_in(directory: Path) -> str | None:
    """The shadowing message for a file or folder of ``directory`` that Python would import as one of our packages.

    What ``idempotent-consumer invoke`` checks before it puts the function's directory first on ``sys.path``: in
    Lambda that directory comes first too. A copy of this distribution installed there (``pip install --target``,
    ``sam build``: its ``.dist-info`` beside it), or a source checkout of it (``invoke`` run from a clone of the
    repository), is not a shadow.

    Args:
        directory: The function's root directory.

    Returns:
        The message for the first shadowing file or folder, or ``None``.
    """
    for name in ("consumer", "persistence"):
        spec = importlib.machinery.PathFinder.find_spec(name, [str(directory)])
        if spec is None or not spec.has_location or not spec.origin:
            continue  # nothing there, or a folder without __init__.py (a namespace portion never shadows a package)
        found = Path(spec.origin)
        if found.name.startswith("__init__."):
            found = found.parent
            if _same(found, _HOME / name) or _a_copy_of_ours(found, directory):
                continue
        return shadowing_message(name, found, _HOME / name)
    return None


def _a_copy_of_ours(found: Path, directory: Path) -> bool:
    """Whether the package folder ``found`` is this distribution's: installed there, or its source (this module)."""
    return any(directory.glob("idempotent_consumer-*.dist-info")) or (found / "_shadowing.py").is_file()


def clobbered_message() -> str:
    """The message for a ``consumer/__init__.py`` that is not ours: another distribution's package, installed over ours.

    Only the command's entry point asks, when ``from consumer import __version__`` failed. The installed
    distributions' records (``importlib.metadata``) name the other one.

    Returns:
        The message, naming the other distribution(s) and the fix.
    """
    import importlib.metadata  # noqa: PLC0415 - only on this error path

    module = sys.modules.get("consumer")
    where = Path(getattr(module, "__file__", None) or _HOME / "consumer" / "__init__.py").parent
    shippers = importlib.metadata.packages_distributions().get("consumer", [])
    others = sorted({name for name in shippers if name.lower().replace("_", "-") != "idempotent-consumer"})
    if not others:
        return (
            f"the package 'consumer' in {where} is not idempotent-consumer's (its __init__.py does not define"
            " __version__): reinstall it (pip install --force-reinstall idempotent-consumer)"
        )
    named = ", ".join(others)
    return (
        f"another installed package ships a top-level 'consumer' package: {named}; its files replaced "
        f"idempotent-consumer's in {where}, so the two cannot share an environment. Uninstall it (pip uninstall "
        f"{' '.join(others)}), then reinstall idempotent-consumer (pip install --force-reinstall idempotent-consumer),"
        " or give each its own virtual environment"
    )
