"""The library's shape: a small core, features in wings, imports that run one way (docs/architecture.md).

The import graph is read from the source with ``ast``, nothing is imported. An edge is an ``import`` statement
of the library, written at module level or inside a function (a lazy import), as the module it names: ``from
consumer.batch import _report`` names ``consumer.batch._report``, ``from consumer.batch import BatchProcessor``
names ``consumer.batch``. Importing a module also runs the ``__init__`` of each package above it that the importer
is not itself inside (its own packages are being imported already): ``consumer.batch._report`` importing
``consumer.observability.metrics`` runs ``consumer.observability`` too, so that is an edge as well. A module that
names a package above itself (``from consumer.sources import SQSRecord`` in ``consumer/sources/_record_views.py``)
has that edge: the package's ``__init__`` may not have defined the name yet.

What is not an edge: an import under ``if TYPE_CHECKING:`` (it never runs). A circle through a lazy import is a
circle: the issue's ``guard -> ... -> _outcomes_log -> _batch_run -> guard`` ran through one.

The core is what lies directly in ``consumer/``; a wing is a subpackage of it. The core imports no wing, at module
level or lazily, except the lazy imports of ``LAZY_CORE_TO_WING``, each loaded only when a user's data asks for
that wing. ``consumer/__init__.py`` is the public face: it re-exports every public name, wings' included.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("consumer", "persistence")
MAX_LINES = 400
MAX_CORE_MODULES = 16
PUBLIC_FACE = "consumer"

#: The core's only imports of a wing: lazy, inside the function that meets the user's data that needs it.
LAZY_CORE_TO_WING = {
    # A typed result (a dataclass or model return annotation) or a declared output serializer: the typed-replay
    # machinery loads when a decorated function or a guard meets one; plain JSON results never load it.
    ("consumer._output", "consumer.serialization"),
    # header() in a key expression reads a Kafka or SQS header: most keys never call it.
    ("consumer._jmespath", "consumer.sources"),
    # A key selection that selected nothing: the message names the record by its source's id, and the source's
    # field that holds JSON text (an SQS body). A record whose key is found never loads it.
    ("consumer.keys", "consumer.sources"),
}


class Import(NamedTuple):
    target: str
    line: int
    lazy: bool


def _name_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the library by dotted name."""
    return {_name_of(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(body: list[ast.stmt], *, lazy: bool) -> list[tuple[ast.stmt, bool]]:
    """The import statements in ``body`` (recursively), each with whether it runs inside a function."""
    found: list[tuple[ast.stmt, bool]] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, lazy))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            found += _statements(node.orelse, lazy=lazy)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += _statements(node.body, lazy=True)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    found += _statements([c for c in children if isinstance(c, ast.AST)], lazy=lazy)
    return found


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_package = modules()[module].name == "__init__.py"
    base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


@functools.cache
def imports_of(module: str) -> tuple[Import, ...]:
    """The library modules ``module`` imports (explicitly, and the packages above them that those imports run)."""
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    named: list[Import] = []
    for node, lazy in _statements(tree.body, lazy=False):
        if isinstance(node, ast.Import):
            named += [Import(alias.name, node.lineno, lazy) for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            base = _resolve(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                named.append(Import(sub if sub in modules() else base, node.lineno, lazy))
    found: dict[tuple[str, bool], Import] = {}
    for imp in named:
        if imp.target.split(".")[0] not in PACKAGES:
            continue
        parts = imp.target.split(".")
        for depth in range(1, len(parts) + 1):
            target = ".".join(parts[:depth])
            inside = module.startswith(target + ".")  # a package above the importer: being imported already
            named = depth == len(parts)  # the module the statement names: an edge even to a package above
            if target in modules() and target != module and (named or not inside):
                found.setdefault((target, imp.lazy), imp._replace(target=target))
    return tuple(found.values())


def graph(*, lazy: bool) -> dict[str, set[str]]:
    """Module -> the modules it imports (module level only, or lazy imports too)."""
    return {m: {i.target for i in imports_of(m) if lazy or not i.lazy} for m in modules()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:  # noqa: C901 - Tarjan's algorithm, in one piece
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports, each module importing the next (the graph's circles collapsed to one step)."""
    component = {m: i for i, c in enumerate(circles(edges)) for m in c}

    @functools.cache
    def longest(v: str) -> tuple[str, ...]:
        here = component.get(v)
        best: tuple[str, ...] = ()
        for w in sorted(edges[v]):
            if here is not None and component.get(w) == here:
                continue
            best = max(best, longest(w), key=len)
        return (v, *best)

    return list(max((longest(v) for v in edges), key=len))


def _core(module: str) -> bool:
    """Whether ``module`` is a file directly in ``consumer/`` (a wing's ``__init__`` is the wing's)."""
    path = modules().get(module)
    return path is not None and path.parent == ROOT / "consumer" and (module == "consumer" or path.stem != "__init__")


def _wing(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "consumer" and len(parts) > 1 and not _core(module) else None


def test_no_import_circle_in_the_library():
    assert circles(graph(lazy=True)) == []


def test_no_module_over_400_lines():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_the_core_is_at_most_16_modules():
    core = sorted(p.name for p in (ROOT / "consumer").glob("*.py"))
    assert len(core) <= MAX_CORE_MODULES, core


def test_the_core_imports_no_wing_but_the_listed_lazy_imports():
    arrows = [
        (m, i.target, i.line, "lazy" if i.lazy else "module level")
        for m in modules()
        if _core(m) and m != PUBLIC_FACE
        for i in imports_of(m)
        if (wing := _wing(i.target)) is not None and not (i.lazy and (m, wing) in LAZY_CORE_TO_WING)
    ]
    assert arrows == []


def test_every_lazy_core_import_listed_is_still_there():
    used = {(m, _wing(i.target)) for m in modules() if _core(m) for i in imports_of(m) if i.lazy}
    assert used >= LAZY_CORE_TO_WING


def test_persistence_never_imports_consumer():
    arrows = []
    for module, path in modules().items():
        if module.startswith("persistence"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):  # TYPE_CHECKING and lazy imports included: none at all
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                arrows += [(module, n, node.lineno) for n in names if n.split(".")[0] == "consumer"]
    assert arrows == []


def test_the_graph_reader_sees_a_circle_and_an_arrow():
    # The checks above pass vacuously if the reader finds no edges: it must find the arrows this test file knows.
    edges = graph(lazy=True)
    assert "consumer.guard" in edges["consumer.decorators"]
    assert "persistence" in edges["consumer.guard"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}) == ["d", "a", "b", "c"]
