"""The import graph of ``orchestrace`` has no cycle and no upward arrow.

Every import counts, also one inside a function (that is how the old cycles hid); imports under
``if TYPE_CHECKING:`` do not run, so they do not count. The contract, lowest layer first: a
module may import its own package and any package of a lower layer, nothing else.

- ``core``: the trace vocabulary (model, reading, validation, writing, graph, accessors, plugins)
- ``orchestrace`` (the package's ``__init__``): re-exports of ``core``
- ``parallel``: the local/Ray parallel map
- ``measure``: metrics of one trace and of a corpus
- ``reward``: reward channels (reads ``measure``'s critical path)
- ``credit``: credit assignment
- ``export``, ``importers``, ``runtime``, ``store``, ``gen``: independent of each other
- ``viewer``: pages and reports (opens a trace from a file or a ``store``)
- ``learn``: environments, policies and training (runs ``runtime``, reads credit and reward)
- ``cli``, then ``__main__``: parse, call the library, print
"""

from __future__ import annotations

import subprocess
import sys

import grimp

LAYERS: list[set[str]] = [
    {"core"},
    {""},  # orchestrace/__init__.py
    {"parallel"},
    {"measure"},
    {"reward"},
    {"credit"},
    {"export", "importers", "runtime", "store", "gen"},
    {"viewer"},
    {"learn"},
    {"cli"},
    {"__main__"},
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("orchestrace", cache_dir=None, exclude_type_checking_imports=True)


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    g = _graph()
    edges = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    cycles = _cycles(edges)
    assert not cycles, "import cycles (each a set of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_every_package_has_a_layer() -> None:
    g = _graph()
    missing = sorted({_top(m) for m in g.modules} - set(RANK))
    assert not missing, f"packages with no layer in LAYERS (add them where they belong): {missing}"


def test_no_upward_or_sideways_import() -> None:
    g = _graph()
    bad = []
    for importer in sorted(g.modules):
        for imported in sorted(g.find_modules_directly_imported_by(importer)):
            a, b = _top(importer), _top(imported)
            if a != b and RANK.get(a, -1) <= RANK.get(b, -1):
                bad.append(f"{importer} -> {imported}")
    assert not bad, "imports against the layer contract (see this test's docstring):\n" + "\n".join(bad)


def test_importing_logs_loads_no_scipy() -> None:
    """The importers order their events with core.order (plain Python): scipy's import time stays
    off ``orchestrace import``."""
    code = (
        "import sys, orchestrace.importers.claude_code, orchestrace.importers._common;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
