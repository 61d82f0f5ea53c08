"""Only the book writes the book's state (docs/scheduler.md, "One book of state").

`streams/scheduler/book.py` alone assigns, deletes or mutates what the book owns: the
reservation table, the queue, the decided jobs, the epochs, the released log, the moves table
and the defragmentation rooms, and the GPU arrays' reservations and holds (`ClusterState.reserve`
and `release`, a subscript write to its free-capacity arrays, or a `Statement` built on them,
as `scorer.replan.Statement(state)` would hold GPUs behind the book's back). Every other module
of streams/ changes them through the book's methods or the book's `Statement`.

The source is parsed (ast), as the layout test does; nothing is imported. A structure is known by
the name it is reached under: `s.reservations[job] = ...`, `del self.moves[job]`,
`r.parts.book.rooms.pop(gang)`, `self.parts.state.release(key)`, or a local bound to one of them
(`state = s.state`, `st = self.s.state`), anywhere in the module. Not seen: a table handed to a
function under a bare parameter name (only `state` is caught bare), an entry changed in place,
a write through `getattr` or a loop variable.

Names the book's structures share with other owners' are listed in `ELSEWHERE` with the reason;
an entry there that matches no write fails, so the list cannot outlive what it excuses.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

STREAMS = Path(__file__).resolve().parents[2] / "streams"
BOOK = "streams.scheduler.book"

# What the book owns, by the attribute name it is reached under.
TABLES = frozenset({"reservations", "queue", "final", "epochs", "released", "moves", "rooms"})
ARRAYS = "state"  # the ClusterState: its reservations and holds
ARRAY_WRITES = frozenset({"reserve", "release"})
ARRAY_FIELDS = frozenset({"free_milli", "free_whole", "free_cpu", "free_mem"})
# calls that change a mapping, a set, a list, or the book's horizon structures
MUTATORS = frozenset({
    "pop", "popitem", "clear", "update", "setdefault", "add", "discard", "append", "extend",
    "insert", "remove", "__setitem__", "__delitem__", "expire", "forget", "forget_local",
})  # fmt: skip

# (module, the expression written) -> why it is not the book's.
ELSEWHERE: dict[tuple[str, str], str] = {
    ("streams.ledger.ledger", "self.final"): "the ledger's fold of the decision log",
    ("streams.ledger.ledger", "self.moves"): "the ledger's fold of the migration log",
    ("streams.scheduler.queueing", "s.tenancy.reservations"): "quota reservations (Tenancy's)",
    # a what-if: the victims' GPUs are released and put back before the call returns; not
    # routed through the book because it sits on the preemption search's hot path
    ("streams.scheduler.victim_search", "st"): "victims released and put back in one call",
}


def chain(node: ast.expr) -> tuple[str, ...] | None:
    """`a.b.c` as ("a", "b", "c"); None for anything but names and attributes."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(names))


def owned(names: tuple[str, ...]) -> str | None:
    """Which of the book's structures `names` reaches by its last name: a table, the arrays."""
    if names[-1] in TABLES and len(names) > 1:
        return names[-1]
    return ARRAYS if names[-1] == ARRAYS else None


def aliases(tree: ast.AST) -> dict[str, str]:
    """Locals bound to one of the book's structures anywhere in the module (`state = s.state`,
    `now, state = clock.now(), s.state`)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = [(node.target, node.value)]
        else:
            continue
        for target, value in pairs:  # grows with the pairs of a tuple assignment
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                pairs.extend(zip(target.elts, value.elts, strict=False))
            names = chain(value)
            what = owned(names) if names is not None and len(names) > 1 else None
            if isinstance(target, ast.Name) and what is not None:
                out[target.id] = what
    return out


def writes(source: str) -> Iterator[tuple[int, str, str]]:
    """(line, the expression written, how) for every write to the book's structures."""
    tree = ast.parse(source)
    bound = aliases(tree)

    def target(node: ast.expr) -> tuple[str, str] | None:
        names = chain(node)
        if names is None:
            return None
        what = bound.get(names[0]) if len(names) == 1 else owned(names)
        if what is None and names == (ARRAYS,):
            what = ARRAYS
        return (".".join(names), what) if what is not None else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            for t in flat:
                if not isinstance(t, ast.Subscript):
                    continue
                hit = target(t.value)
                if hit is not None and hit[1] != ARRAYS:
                    yield node.lineno, hit[0], "[] ="
                names = chain(t.value)
                if names and names[-1] in ARRAY_FIELDS and len(names) > 1:
                    inner = target(t.value.value) if isinstance(t.value, ast.Attribute) else None
                    if inner is not None and inner[1] == ARRAYS:
                        yield node.lineno, inner[0], f".{names[-1]}[] ="
        elif isinstance(node, ast.Call) and (built := chain(node.func)):
            if built[-1] == "Statement":  # the scorer's statement holds GPUs in what it is given
                for arg in node.args:
                    hit = target(arg)
                    if hit is not None and hit[1] == ARRAYS:
                        yield node.lineno, hit[0], " in a Statement()"
            if not isinstance(node.func, ast.Attribute):
                continue
            hit = target(node.func.value)
            if hit is None:
                continue
            call = node.func.attr
            if (hit[1] == ARRAYS and call in ARRAY_WRITES) or (
                hit[1] != ARRAYS and call in MUTATORS
            ):
                yield node.lineno, hit[0], f".{call}()"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(STREAMS.rglob("*.py")):
        parts = path.relative_to(STREAMS.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def found() -> list[tuple[str, int, str, str]]:
    """Every write outside the book: (module, line, expression, how)."""
    return [
        (name, line, expr, how)
        for name, path in modules().items()
        if name != BOOK
        for line, expr, how in writes(path.read_text())
    ]


def test_only_the_book_writes_its_state() -> None:
    bad = [
        f"{name}:{line} writes {expr}{how}"
        for name, line, expr, how in found()
        if (name, expr) not in ELSEWHERE
    ]
    assert bad == [], "writes to the book's state outside streams/scheduler/book.py:\n" + (
        "\n".join(bad)
    )


def test_every_exemption_still_matches_a_write() -> None:
    seen = {(name, expr) for name, _, expr, _ in found()}
    assert sorted(set(ELSEWHERE) - seen) == []


def test_the_book_itself_is_seen_writing() -> None:
    """The check reads the real book: its own writes are what it would flag elsewhere."""
    got = {(expr, how) for _, expr, how in writes(Path(STREAMS, "scheduler/book.py").read_text())}
    assert {("self.state", ".reserve()"), ("self.moves", "[] ="), ("self.rooms", ".pop()")} <= got


SAMPLE = """
def f(s, r, book, statement, released, table):
    s.reservations["a"] = {}                # 3: a table entry written
    del r.parts.book.moves["a"]             # 4: deleted
    s.book.rooms.pop("g", None)             # 5: a mutating call
    state = r.parts.state
    state.reserve("a", [])                  # 7: the arrays, through a local bound to them
    s.state.free_milli[0, 1] -= 10          # 8: an array written in place
    now, st = 0, s.state
    st.release("a")                         # 10: a tuple-bound local
    s.queue.get("a")                        # reads: not writes
    book.release("a")                       # the book's own method
    statement.reserve("a", [])              # a Statement's
    released.append("eu")                   # a local list that shares a table's name
    table["a"] = 1                          # a bare parameter: not seen (documented)
    s.epochs["a"] += 1                      # 16: augmented
    Statement(s.parts.state)                # 17: the scorer's statement on the arrays
    s.book.statement()                      # the book's own
"""


def test_the_check_sees_each_kind_of_write() -> None:
    assert sorted(writes(SAMPLE)) == [
        (3, "s.reservations", "[] ="),
        (4, "r.parts.book.moves", "[] ="),
        (5, "s.book.rooms", ".pop()"),
        (7, "state", ".reserve()"),
        (8, "s.state", ".free_milli[] ="),
        (10, "st", ".release()"),
        (16, "s.epochs", "[] ="),
        (17, "s.parts.state", " in a Statement()"),
    ]
