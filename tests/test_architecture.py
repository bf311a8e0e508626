"""The house's dependency rules, read from the code's own imports (``ast``).

Parts and the arrows that must never exist (the same picture as the design's
``architecture.json``): the core (``lineage/``) knows no face and no trainer code; the
trainer (``trainer_hooks/``) talks to the ledger over HTTP only, so it imports neither
the core nor the faces; the faces (``api/``) never import trainer code (the server runs
without torch; trainer commands reach the CLI through the ``lineage.commands`` entry
points). And no import circle between modules anywhere in the three packages.

Every import counts, also one inside a function (a lazy import is still a dependency);
imports under ``if TYPE_CHECKING:`` count for the rules but not for circles, since they
never run.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: part -> (folder, the module prefix it ships as)
PARTS = {
    "Core": ("lineage", "lineage"),
    "Faces": ("api", "api"),
    "Trainer": ("trainer_hooks", "trainer_hooks"),
    "Schema": ("migrations", "lineage.migrations"),
}
#: (from, to, why): arrows that must never exist
NEVER = (
    ("Core", "Faces", "the core knows no HTTP, CLI or page"),
    ("Core", "Trainer", "the server runs without torch"),
    ("Trainer", "Core", "a training job talks over HTTP only"),
    ("Trainer", "Faces", "a training job talks over HTTP only"),
    ("Faces", "Trainer", "the server runs without torch"),
)
#: the packages in which no module may take part in an import circle
NO_CIRCLES = ("Core", "Faces", "Trainer")


@dataclass(frozen=True)
class Import:
    source: str  # module that imports
    target: str  # module imported (resolved to a module of this tree where possible)
    line: int
    type_only: bool


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the four parts by its import name."""
    out: dict[str, Path] = {}
    for folder, prefix in PARTS.values():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([prefix, *parts])] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """``name`` if it is a module of the tree, else the longest prefix that is."""
    probe = name
    while probe and probe not in modules:
        probe = probe.rpartition(".")[0]
    return probe or name


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit_stmt(stmt, True)
                for stmt in child.orelse:
                    visit_stmt(stmt, type_only)
                continue
            visit_stmt(child, type_only)

    def visit_stmt(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, _resolve(alias.name, modules), node.lineno, type_only))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in modules else _resolve(base, modules)
                found.append(Import(module, target, node.lineno, type_only))
        visit(node, type_only)

    visit(tree, False)
    return found


def part_of(module: str) -> str | None:
    best: tuple[int, str] | None = None
    for part, (_folder, prefix) in PARTS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > best[0]:
                best = (len(prefix), part)
    return best[1] if best else None


def all_imports(root: Path = ROOT) -> list[Import]:
    modules = module_files(root)
    return [imp for module, path in modules.items() for imp in imports_of(module, path, modules)]


def broken_rules(imports: list[Import], modules: dict[str, Path]) -> list[str]:
    never = {(a, b): why for a, b, why in NEVER}
    out = []
    for imp in imports:
        edge = (part_of(imp.source), part_of(imp.target))
        if edge in never:
            where = modules[imp.source].relative_to(ROOT) if imp.source in modules else imp.source
            out.append(f"{where}:{imp.line} imports {imp.target} ({edge[0]} -> {edge[1]}: {never[edge]})")
    return sorted(set(out))


def circles(imports: list[Import], modules: dict[str, Path]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    watched = {m for m in modules if part_of(m) in NO_CIRCLES}
    graph: dict[str, set[str]] = {m: set() for m in watched}
    for imp in imports:
        if not imp.type_only and imp.source in watched and imp.target in watched and imp.source != imp.target:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_breaks_a_dependency_rule() -> None:
    modules = module_files()
    broken = broken_rules(all_imports(), modules)
    assert not broken, "dependency rules broken:\n" + "\n".join(broken)


def test_no_import_circle_in_the_packages() -> None:
    modules = module_files()
    found = circles(all_imports(), modules)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_see_a_broken_rule_and_a_circle(tmp_path: Path) -> None:
    # The reader itself, on a tree made to break both rules: a core module importing a
    # face lazily, and two face modules importing each other.
    (tmp_path / "lineage").mkdir()
    (tmp_path / "api").mkdir()
    (tmp_path / "trainer_hooks").mkdir()
    (tmp_path / "migrations").mkdir()
    (tmp_path / "lineage" / "__init__.py").write_text("")
    (tmp_path / "lineage" / "core.py").write_text("def f():\n    from api.a import x\n")
    (tmp_path / "api" / "__init__.py").write_text("")
    (tmp_path / "api" / "a.py").write_text("from api import b\nx = 1\n")
    (tmp_path / "api" / "b.py").write_text("from .a import x\n")
    (tmp_path / "trainer_hooks" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import lineage.core\n"
    )
    modules = module_files(tmp_path)
    imports = all_imports(tmp_path)
    assert sorted(c for c in circles(imports, modules)) == [["api.a", "api.b"]]
    broken = [
        (part_of(i.source), part_of(i.target))
        for i in imports
        if (part_of(i.source), part_of(i.target)) in {(a, b) for a, b, _ in NEVER}
    ]
    assert sorted(broken) == [("Core", "Faces"), ("Trainer", "Core")]


def test_rules_agree_with_the_design_picture() -> None:
    picture = ROOT.parent / "shared" / "architecture.json"
    if not picture.exists():
        pytest.skip("the design's architecture.json lives beside the checkout, not in it")
    data = json.loads(picture.read_text(encoding="utf-8"))
    assert {(a, b) for a, b, *_ in data["never"]} == {(a, b) for a, b, _ in NEVER}
    for part, (folder, _prefix) in PARTS.items():
        assert data["parts"][part]["is"] == [folder + "/"]
