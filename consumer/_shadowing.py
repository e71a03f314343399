"""Refuse a module of the user's that shadows ``persistence`` (or, in ``invoke``, either package).

idempotent-consumer installs two top-level packages, ``consumer`` and ``persistence``: names that a user's own file
or folder in a Lambda function's root (``consumer.py``, ``persistence/``) can take. Python then imports the user's
(the function's root comes first on ``sys.path``), with an error that does not say why. ``consumer/__init__.py``
checks ``persistence`` before anything imports it, and ``persistence/__init__.py`` checks ``consumer``: one check,
``persistence/_shadowing.py`` (``persistence`` never imports ``consumer``), loaded here from its file. A user's
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

_CHECK = "persistence._shadowing"
# The check itself is persistence's (persistence never imports consumer). It is loaded from its file beside this
# package, not imported by name: `import persistence._shadowing` would first run whatever `persistence` is, a
# user's persistence.py included. Once in sys.modules, the import below (and persistence/__init__.py's, if it came
# first) finds it there without running any package's __init__.
if _CHECK not in sys.modules:
    _spec = importlib.machinery.PathFinder.find_spec(_CHECK, [str(Path(__file__).parent.parent / "persistence")])
    if _spec is None or _spec.loader is None:
        raise ImportError(f"idempotent-consumer is incomplete: {_CHECK} is missing", name=_CHECK)
    sys.modules[_CHECK] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_CHECK])

from persistence._shadowing import _HOME, _same, refuse_shadowed, shadowing_message  # noqa: E402 - loaded just above

__all__ = ["clobbered_message", "refuse_shadowed", "shadowing_in", "shadowing_message"]


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
