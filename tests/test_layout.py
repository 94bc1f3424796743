"""The package's layout: no import cycle, imports only in the documented direction, and
docs/ARCHITECTURE.md's layout naming exactly the packages that exist.

Imports are read with ast (no module is imported): every `import` and `from ... import`
anywhere in a file counts, inside functions and under TYPE_CHECKING too.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scalebench"
FRAMEWORK_PACKAGES = ("ddp", "horovod", "ray")

# (who, what it may not import, the rule in words). A name matches itself and what lies below it.
RULES: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("*",), ("scalebench.cli",), "nothing below the CLI imports it (only __main__ starts it)"),
    (("*",), ("scalebench.commands",), "only cli and commands import commands"),
    (("scalebench.analysis", "scalebench.tracking"),
     ("scalebench.frameworks.", "scalebench.running", "scalebench.tasks", "scalebench.slurm",
      "scalebench.vet", "scalebench.report.model", "scalebench.report.figures",
      "scalebench.report.html", "scalebench.report.markdown"),
     "analysis and tracking never import frameworks' packages, launchers (tasks, running, "
     "slurm), vetting or the report (the framework registry's facts and report.format only)"),
    (("scalebench.worker", "scalebench.models", "scalebench.frameworks.worker_io",
      "scalebench.frameworks.torch_dist", "scalebench.frameworks.ddp.worker",
      "scalebench.frameworks.horovod.worker", "scalebench.frameworks.horovod.slurm_worker",
      "scalebench.frameworks.ray.worker"),
     ("scalebench.report", "scalebench.analysis.compare", "scalebench.analysis.breakdown",
      "scalebench.analysis.scaling_model", "scalebench.tracking", "scalebench.running"),
     "a worker-side module never imports the report, analysis of records, tracking or the "
     "sweep's runner"),
    (("scalebench.spec", "scalebench.models", "scalebench.hardware", "scalebench.worker",
      "scalebench.records"),
     ("scalebench.running", "scalebench.analysis", "scalebench.tracking", "scalebench.report"),
     "the stages below running (spec, models, hardware, worker, records) never import "
     "running, analysis, tracking or the report"),
    (("scalebench.frameworks", "scalebench.tasks"), ("scalebench.running",),
     "tasks and frameworks never import the sweep's runner"),
    (("scalebench.frameworks", "scalebench.tasks", "scalebench.worker", "scalebench.models",
      "scalebench.analysis", "scalebench.tracking"), ("scalebench.k8s",),
     "frameworks, tasks, the worker side, analysis and tracking stay unaware of Kubernetes "
     "(k8s renders a sweep into operators' jobs; the pods get only the operators' environment)"),
]
EXEMPT = {("scalebench.__main__", "scalebench.cli"), ("scalebench.cli", "scalebench.commands")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported scalebench module: line}; `from pkg import name` resolves to the
    submodule when `name` is one."""
    graph: dict[str, dict[str, int]] = defaultdict(dict)
    for name, path in mods.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if is_package else name.split(".")[:-1]
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for target in targets:
                if target.split(".")[0] != "scalebench":
                    continue
                while target not in mods and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != name:
                    graph[name].setdefault(target, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]], nodes: list[str]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in nodes:
        if v not in index:
            visit(v)
    return groups


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    """`name` is one of prefixes or below one; a prefix ending in '.' matches only below."""
    for prefix in prefixes:
        if prefix == "*":
            return True
        if prefix.endswith("."):
            if name.startswith(prefix):
                return True
        elif name == prefix or name.startswith(prefix + "."):
            return True
    return False


def violations(graph: dict[str, dict[str, int]], mods: dict[str, Path]) -> list[str]:
    found = []
    for source, targets in sorted(graph.items()):
        where = mods[source].relative_to(ROOT)
        for target, line in sorted(targets.items()):
            if (source, target) in EXEMPT or (under(source, ("scalebench.commands",))
                                              and target.startswith("scalebench.commands")):
                continue
            for who, forbidden, rule in RULES:
                if under(source, who) and under(target, forbidden) and source != target:
                    found.append(f"{where}:{line}: {source} imports {target}: {rule}")
            own = framework_of(source)
            other = framework_of(target)
            if own and other and own != other:
                found.append(f"{where}:{line}: {source} imports {target}: framework packages "
                             f"never import each other")
    return found


def framework_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) >= 3 and parts[1] == "frameworks" and parts[2] in FRAMEWORK_PACKAGES:
        return parts[2]
    return None


def test_the_import_graph_has_no_cycle():
    mods = modules()
    graph = imports(mods)
    groups = cycles(graph, sorted(mods))
    lines = []
    for group in groups:
        lines.append("a cycle through " + ", ".join(group) + "; its imports:")
        lines += [f"  {mods[s].relative_to(ROOT)}:{graph[s][t]}: {s} imports {t}"
                  for s in group for t in graph.get(s, {}) if t in group]
    assert not groups, "import cycles (the rule: no cycle at all):\n" + "\n".join(lines)


def missing_modules(mods: dict[str, Path], files: list[Path]) -> list[str]:
    """Imports of scalebench modules that do not exist in this tree. An editable install of
    another checkout would still resolve them (its finder serves any scalebench.* name), so a
    stale path from a move could pass here and fail on a clean install."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "scalebench" and name not in mods:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name} does not exist")
    return found


def test_every_scalebench_import_names_a_module_of_this_tree():
    mods = modules()
    files = [p for d in ("scalebench", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    found = missing_modules(mods, files)
    assert not found, "imports of modules that are not in the tree:\n" + "\n".join(found)


def test_imports_follow_the_documented_direction():
    mods = modules()
    found = violations(imports(mods), mods)
    assert not found, "imports against the documented direction:\n" + "\n".join(found)


def test_a_forbidden_import_is_named_with_its_rule():
    """The checker itself: a made-up graph with one import of each kind it must refuse, and
    one it must let through (analysis -> the framework registry)."""
    mods = {m: PACKAGE / "made_up.py" for m in (
        "scalebench.analysis.aggregate", "scalebench.frameworks.ddp.launcher",
        "scalebench.frameworks.ray.worker", "scalebench.worker.measure", "scalebench.report.html",
        "scalebench.commands.sweep", "scalebench.running.sweep", "scalebench.frameworks")}
    graph = {
        "scalebench.analysis.aggregate": {"scalebench.frameworks.ddp.launcher": 3,
                                          "scalebench.frameworks": 4},
        "scalebench.frameworks.ray.worker": {"scalebench.frameworks.ddp.launcher": 5},
        "scalebench.worker.measure": {"scalebench.report.html": 6},
        "scalebench.running.sweep": {"scalebench.commands.sweep": 7},
    }
    found = violations(graph, mods)
    assert len({f.split(": ")[0] for f in found}) == 4, found
    assert not any(":4:" in f for f in found), found
    assert any("aggregate imports scalebench.frameworks.ddp.launcher: analysis" in f for f in found)
    assert any("framework packages never import each other" in f for f in found)
    assert any("measure imports scalebench.report.html: a worker-side" in f for f in found)
    assert any("only cli and commands import commands" in f for f in found)
    assert cycles({"a": {"b": 1}, "b": {"a": 2}, "c": {"a": 1}}, ["a", "b", "c"]) == [["a", "b"]]


def layout_packages() -> set[str]:
    """Packages docs/ARCHITECTURE.md's Layout section names (`name/` at the start of a line)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    names, parents = set(), {}
    for line in section.splitlines():
        m = re.match(r"^( *)([a-z][a-z0-9_]*)/", line)
        if not m:
            continue
        depth = len(m[1])
        parents = {d: n for d, n in parents.items() if d < depth}
        parent = parents[max(parents)] if parents else None
        full = m[2] if parent in (None, "scalebench") else f"{parent}/{m[2]}"
        parents[depth] = full
        if full != "scalebench":
            names.add(full)
    return names


def test_architecture_names_every_package_and_only_those():
    named = layout_packages()
    real = {str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.rglob("__init__.py")
            if p.parent != PACKAGE}
    assert named == real, (f"named in docs/ARCHITECTURE.md's Layout but missing: "
                           f"{sorted(named - real)}; packages it does not name: {sorted(real - named)}")


def test_every_stage_package_says_what_it_holds_and_may_import():
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(ROOT)} has no docstring"
        assert re.search(r"(?i)\bimport", doc), (f"{init.relative_to(ROOT)}'s docstring does not "
                                             f"say what it may import")
