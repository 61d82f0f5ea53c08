"""streams/ is built in floors: a module imports its own floor and the floors below, never one
above, and no modules of streams import each other in a circle.

Every import counts, also those under `TYPE_CHECKING` and inside functions: a circle of type
hints is still a circle for whoever reads the code. The source is parsed (ast), nothing is
imported, so a module that cannot be imported here is still checked.

A module's floor is the longest prefix in `FLOORS` that names it; a module on no floor fails
the test, so a new subpackage must say where it stands. Why the floors stand in this order:

- base: the outbox, the clock, the topic follower, the Prometheus registry; every floor uses them.
- records: the scheduler's records (jobs, reservations, tenancy, ends) that the floors between
  read without needing the scheduler.
- forecasting < history < telemetry: the history child runs the forecast processor; the
  telemetry reader decodes with the history sink's telemetry lane.
- ledger, bandwidth, replan: pieces the scheduler is given or consults, none needs it.
- scheduler: the scheduling core.
- services: the autoscaler asks the scheduler for replicas.
- runtime: one worker's state (scheduler, fleet, ledger keeper, counters), free of Faust.
- web: the pages read the runtime; the runtime knows no page.
- worker: the Faust app, its agents and timers, the process entry point.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

STREAMS = Path(__file__).resolve().parents[2] / "streams"

# The scheduler's records: the floors between read them without needing the scheduler.
_CORE_RECORDS = ("convert", "validation", "job_end", "fairness", "running_book", "tenancy")

# Lowest first: (floor, module prefixes on it).
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("streams", "streams.base")),
    ("records", tuple(f"streams.scheduler.{m}" for m in _CORE_RECORDS)),
    ("forecasting", ("streams.forecasting",)),
    ("history", ("streams.history",)),
    ("telemetry", ("streams.telemetry",)),
    ("ledger", ("streams.ledger",)),
    ("bandwidth", ("streams.bandwidth",)),
    ("replan", ("streams.replan",)),
    ("scheduler", ("streams.scheduler",)),
    ("services", ("streams.services",)),
    ("runtime", ("streams.runtime",)),
    ("web", ("streams.web",)),
    # the cancel agent is a Faust agent of the core's: it stands with the other agents
    ("worker", ("streams.worker", "streams.__main__", "streams.scheduler.cancel_agent")),
)


def modules() -> dict[str, Path]:
    """Every module of streams/ by its dotted name (a package by its own name)."""
    out = {}
    for path in sorted(STREAMS.rglob("*.py")):
        parts = path.relative_to(STREAMS.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, known: Iterable[str]) -> Iterator[str]:
    """The modules of streams that `name` imports, anywhere in its source."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in known:  # `from streams import quota_holds`
                    yield f"{base}.{alias.name}"
                elif base in known:
                    yield base


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {n: set(imported(n, p, mods)) - {n} for n, p in mods.items()}


def floor_of(name: str) -> int | None:
    """The floor of the longest prefix that names `name` ("streams" names only itself)."""
    hits = [
        (len(prefix), level)
        for level, (_, prefixes) in enumerate(FLOORS)
        for prefix in prefixes
        if name == prefix or (prefix != "streams" and name.startswith(prefix + "."))
    ]
    return max(hits)[1] if hits else None


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_stands_on_a_floor() -> None:
    lost = [name for name in modules() if floor_of(name) is None]
    assert lost == [], f"modules on no floor of FLOORS (say where they stand): {lost}"


def test_no_import_runs_up_a_floor() -> None:
    names = [floor for floor, _ in FLOORS]
    up = []
    for a, targets in sorted(graph().items()):
        fa = floor_of(a)
        for b in sorted(targets):
            fb = floor_of(b)
            if fa is not None and fb is not None and fb > fa:
                up.append(f"{a} (floor {names[fa]}) imports {b} (floor {names[fb]})")
    assert up == [], "imports that run up a floor:\n" + "\n".join(up)


def test_no_circle_among_streams_modules() -> None:
    edges = graph()
    bad = []
    for part in circles(edges):
        a = part[0]
        b = next(t for t in sorted(edges[a]) if t in part)
        bad.append(f"{a} imports {b}, and {b} leads back to {a} (circle of {len(part)}: {part})")
    assert bad == [], "import circles in streams/:\n" + "\n".join(bad)


def test_the_checks_see_a_circle_and_a_floor() -> None:
    """The detector itself, on a made-up graph: a -> b -> a is found, a lone edge is not; a
    module's floor is its longest prefix's."""
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    names = [floor for floor, _ in FLOORS]
    assert floor_of("streams") == floor_of("streams.base.outbox") == names.index("base")
    assert floor_of("streams.web.pages") == names.index("web")
    assert floor_of("streams.scheduler.cancel_agent") == names.index("worker")
    assert floor_of("streams.scheduler.convert") == names.index("records")
    assert floor_of("streams.scheduler.core") == names.index("scheduler")
    assert floor_of("streams.nowhere") is None
