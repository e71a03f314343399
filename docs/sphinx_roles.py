"""A griffe extension for the API reference (mkdocs.yml): the docstrings' Sphinx roles read as code.

The code names other objects the Sphinx way (``:class:`~persistence.PersistenceLayerError```), which the reference's
Markdown would show as it is written. Each role becomes inline code of the name, shortened where a ``~`` says so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from griffe import Extension, Object

if TYPE_CHECKING:
    from griffe import Module

ROLE = re.compile(r":(?:class|func|meth|data|attr|exc|mod|obj):`(?P<short>~?)(?P<name>[^`]+)`")


def as_code(text: str) -> str:
    """``text`` with each Sphinx role written as inline code: ``:class:`~a.B``` -> ```B```."""
    return ROLE.sub(lambda m: f"`{m['name'].rsplit('.', 1)[-1] if m['short'] else m['name']}`", text)


class SphinxRoles(Extension):
    """Rewrite the roles of every docstring of a package once it is loaded (attributes' ``#:`` comments included)."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:  # noqa: ARG002 - griffe's hook signature
        """Rewrite every docstring of ``pkg`` and its members."""
        todo: list[Object] = [pkg]
        while todo:
            obj = todo.pop()
            if obj.docstring is not None:
                obj.docstring.value = as_code(obj.docstring.value)
            todo.extend(m for m in obj.members.values() if isinstance(m, Object))  # aliases: rewritten where defined
