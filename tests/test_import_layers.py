"""The import graph of ``orchestrace`` has no cycle and no upward arrow, and names no upper layer in a string.

Every import counts, also one inside a function (that is how the old cycles hid) and one under
``if TYPE_CHECKING:`` (a type-only import is still a file that needs the other one). Every module
is in the graph: a folder of modules without ``__init__.py`` (a namespace package) is reported,
since grimp leaves it out. The contract, lowest layer first: a module may import its own package
and any package of a lower layer, nothing else.

- ``core``: the trace vocabulary (model, reading, validation, writing, graph, accessors, plugins)
- ``orchestrace`` (the package's ``__init__``): re-exports of ``core``
- ``parallel``: the local/Ray parallel map
- ``measure``: metrics of one trace and of a corpus
- ``reward``: reward channels (reads ``measure``'s critical path)
- ``credit``: credit assignment
- ``export``, ``importers``, ``runtime``, ``store``, ``gen``, ``validation`` (files validated over
  processes): independent of each other
- ``viewer``: pages and reports (opens a trace from a file or a ``store``)
- ``learn``: environments, policies and training (runs ``runtime``, reads credit and reward)
- ``cli``, then ``__main__``: parse, call the library, print

Inside ``learn`` the same contract holds between its parts (``LEARN_LAYERS``): the generic loop and
the public data loaders, then the algorithms (``rl``), the stop decision (``stopping``: banks,
features, rules, the stop policy and its training), the Gymnasium views (``envs``, StopVote's over
``stopping``), the runtime adapters of every saved policy (``policies``), then what runs it all
(``team``, ``experiments`` and the package's ``__init__``), and the ``gateway`` over ``team``.

A plugin name in a string (``"package.module:function"``, imported at run time) is an import
too: one that points to a higher layer is an upward arrow no import statement shows. The runtime
finds the programs of upper layers through the ``orchestrace.programs`` entry points, which the
upper layer declares (pyproject.toml), so the runtime names none of them.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

PACKAGE = "orchestrace"
SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: list[set[str]] = [
    {"core"},
    {""},  # orchestrace/__init__.py
    {"parallel"},
    {"measure"},
    {"reward"},
    {"credit"},
    {"export", "importers", "runtime", "store", "gen", "validation"},
    {"viewer"},
    {"learn"},
    {"cli"},
    {"__main__"},
]
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

#: the parts of ``learn`` (a subpackage or a top-level module), lowest first
LEARN_LAYERS: list[set[str]] = [
    {"scalar_log"},  # the --log event writer, fed by the loop and every algorithm
    {"loop", "datasets", "tasks"},  # tasks: task files and verifiers, read by stopping and team
    {"rl"},
    {"stopping"},
    {"envs"},
    {"policies"},
    {"team", "experiments", ""},  # "": learn/__init__.py
    {"gateway"},  # serves and trains any team over HTTP, on top of ``team``'s model and loop
]
LEARN_RANK = {part: i for i, layer in enumerate(LEARN_LAYERS) for part in layer}


PLUGIN_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+(?::\w+)?$")


def build(package: str = PACKAGE) -> grimp.ImportGraph:
    return grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=False)


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _learn_part(module: str) -> str | None:
    """The part of ``learn`` a module belongs to (None: not in learn)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] != "learn":
        return None
    return parts[2] if len(parts) > 2 else ""


def against_layers(importer: str, imported: str) -> bool:
    """Whether ``importer -> imported`` breaks the contract: across packages (or across parts of
    learn) an arrow may only point to a lower layer."""
    a, b = _top(importer), _top(imported)
    if a != b:
        return RANK.get(a, -1) <= RANK.get(b, -1)
    la, lb = _learn_part(importer), _learn_part(imported)
    if la is not None and lb is not None and la != lb:
        return LEARN_RANK.get(la, -1) <= LEARN_RANK.get(lb, -1)
    return False


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
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
    return sorted(out)


def file_cycles(g: grimp.ImportGraph) -> list[list[str]]:
    return cycles({m: set(g.find_modules_directly_imported_by(m)) for m in g.modules})


def upward_imports(g: grimp.ImportGraph) -> list[str]:
    return [
        f"{a} -> {b}"
        for a in sorted(g.modules)
        for b in sorted(g.find_modules_directly_imported_by(a))
        if against_layers(a, b)
    ]


def modules_outside_graph(g: grimp.ImportGraph, root: Path, package: str = PACKAGE) -> list[str]:
    """Modules under ``root`` (the package's folder) that the graph lacks: a folder of modules with
    no ``__init__.py`` is a namespace package, which grimp does not enter."""
    found = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        parts = [package, *rel.parts]
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(found - set(g.modules))


def _module_file(module: str, root: Path) -> Path:
    rel = Path(*module.split(".")[1:])
    pkg = root / rel / "__init__.py"
    return pkg if pkg.is_file() else (root / rel).with_suffix(".py")


def plugin_names_up(g: grimp.ImportGraph, root: Path, package: str = PACKAGE) -> list[str]:
    """Strings ``"package.module[:attr]"`` naming a module of the graph that the module holding the
    string may not import (an upward or sideways arrow taken at run time)."""
    bad = []
    for module in sorted(g.modules):
        tree = ast.parse(_module_file(module, root).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if not PLUGIN_NAME.match(node.value) or not node.value.startswith(package + "."):
                continue
            target = node.value.partition(":")[0]  # a module, not "pkg.attr" (a trace's system name)
            if target in g.modules and against_layers(module, target):
                bad.append(f"{module}:{node.lineno} names {node.value!r}")
    return bad


def test_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_module_is_in_the_graph() -> None:
    missing = modules_outside_graph(build(), SRC / PACKAGE)
    assert not missing, f"modules the import graph does not see (a folder without __init__.py?): {missing}"


def test_no_import_cycle() -> None:
    found = file_cycles(build())
    assert not found, "import cycles (each a set of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_every_package_has_a_layer() -> None:
    g = build()
    missing = sorted({_top(m) for m in g.modules} - set(RANK))
    assert not missing, f"packages with no layer in LAYERS (add them where they belong): {missing}"
    parts = {_learn_part(m) for m in g.modules} - {None}
    missing = sorted(str(p) for p in parts - set(LEARN_RANK))
    assert not missing, (
        f"parts of learn with no layer in LEARN_LAYERS (add them where they belong): {missing}"
    )


def test_no_upward_or_sideways_import() -> None:
    bad = upward_imports(build())
    assert not bad, "imports against the layer contract (see this test's docstring):\n" + "\n".join(bad)


def test_no_plugin_name_points_up() -> None:
    bad = plugin_names_up(build(), SRC / PACKAGE)
    assert not bad, "strings naming a module of a higher layer (register it from there):\n" + "\n".join(bad)


def test_checks_fail_on_a_planted_cycle_and_an_upward_plugin_name(tmp_path: Path, monkeypatch) -> None:
    """A copy of the package (as ``planted``) with a type-only import cycle in learn/stopping, an
    import from rl up to stopping, a runtime string naming a learn program and a namespace folder:
    each check reports what was planted."""
    root = tmp_path / "planted"
    shutil.copytree(SRC / PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "assets", "data"))
    monkeypatch.syspath_prepend(str(tmp_path))
    before = grimp.build_graph("planted", cache_dir=None, exclude_type_checking_imports=False)
    cycles_before, up_before = file_cycles(before), upward_imports(before)
    names_before = plugin_names_up(before, root, "planted")

    stopping = root / "learn" / "stopping"
    banks = stopping / "banks.py"
    banks.write_text(
        banks.read_text()
        + "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .traces import Bank\n"
    )
    rl = root / "learn" / "rl" / "grpo.py"
    rl.write_text(rl.read_text() + "\n\ndef _planted() -> None:\n    from ..stopping import policy  # noqa\n")
    programs = root / "runtime" / "programs" / "__init__.py"
    programs.write_text(programs.read_text() + '\nPLANTED = "planted.learn.team.program:build"\n')
    (stopping / "__init__.py").unlink()

    g = grimp.build_graph("planted", cache_dir=None, exclude_type_checking_imports=False)
    assert "planted.learn.stopping.banks" in modules_outside_graph(g, root, "planted")
    (stopping / "__init__.py").write_text("")
    g = grimp.build_graph("planted", cache_dir=None, exclude_type_checking_imports=False)
    new_cycles = [c for c in file_cycles(g) if c not in cycles_before]
    assert ["planted.learn.stopping.banks", "planted.learn.stopping.traces"] in new_cycles
    assert set(upward_imports(g)) - set(up_before) == {
        "planted.learn.rl.grpo -> planted.learn.stopping.policy"
    }
    [bad] = set(plugin_names_up(g, root, "planted")) - set(names_before)
    assert bad.startswith("planted.runtime.programs:") and "planted.learn.team.program:build" in bad


def test_importing_logs_loads_no_scipy() -> None:
    """The importers order their events with core.order (plain Python): scipy's import time stays
    off ``orchestrace import``."""
    code = (
        "import sys, orchestrace.importers.claude_code, orchestrace.importers.staging;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
