"""The imports between taskcell's modules follow ARCHITECTURE.md, "Layers and imports".

Two checks, one concept each:

- the order and the cycles: ``lint-imports`` checks pyproject.toml's ``[tool.importlinter]``
  contracts over every module, the top-level ones included: the layers, highest first, where a
  module imports only layers below its own; ``taskcell/__init__.py`` imported by ``cli`` alone;
  no cycle between the siblings of any package. One cycle those contracts cannot see, a module
  with a package above it (its own ``__init__``), is checked here with grimp, the graph
  import-linter builds. Imports inside functions and under TYPE_CHECKING count as edges in
  both, with no exception.
- which downward edges between packages are made, and why: the table, which the maintainer
  reads and this test reads too, so a new edge between packages is written down there, with
  its reason, or refused here naming the module and line (a layer may import any layer below
  it; the table says which it does).
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import grimp

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "taskcell"
LINT_IMPORTS = pathlib.Path(sys.executable).parent / "lint-imports"


def test_lint_imports_keeps_the_layers_and_finds_no_cycle():
    out = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_module_is_in_a_cycle_with_a_package_above_it():
    # acyclic_siblings compares siblings; a package's own __init__ is no module's sibling.
    graph = grimp.build_graph("taskcell", include_external_packages=False, cache_dir=None)
    cycles = [
        f"{module} -> {above} (line {details['line_number']}), and {above} imports it back"
        for module in sorted(graph.modules)
        for above in sorted(graph.find_modules_directly_imported_by(module))
        if module.startswith(above + ".") and graph.chain_exists(importer=above, imported=module)
        for details in graph.get_import_details(importer=module, imported=above)
    ]
    assert not cycles, "\n".join(cycles)


def allowed_imports() -> dict[str, set[str]]:
    """``{"runner": {"cluster", "spec", ...}}``, from the table under "Layers and imports"."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Layers and imports", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for row in re.findall(r"^\| *(\w+) *\| *([^|]*)\|$", section, re.MULTILINE):
        package, imports = row
        if package != "package":
            table[package] = set(re.findall(r"\w+", imports))
    return table


def package_imports() -> list[tuple[str, str, str]]:
    """Each ``(package, taskcell package imported, "file:line")`` across packages, at module
    level or inside functions."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1:
            continue  # the top-level modules (errors, config, tasks, cli, demo, __init__)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                target = name.split(".")[1] if name.startswith("taskcell.") else None
                if target is not None and target != parts[0]:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.append((parts[0], target, where))
    return found


def test_the_table_names_every_package():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert set(allowed_imports()) == packages


def test_every_import_between_packages_is_in_the_table():
    allowed = allowed_imports()
    stray = [
        f"{where}: {package} imports taskcell.{target}"
        for package, target, where in package_imports()
        if target not in allowed[package]
    ]
    assert not stray, "\n".join(stray)


def test_the_table_lists_no_import_that_is_not_made():
    made = {(package, target) for package, target, _ in package_imports()}
    unused = [
        f"{package} -> {target}"
        for package, targets in allowed_imports().items()
        for target in targets
        if (package, target) not in made
    ]
    assert not unused, unused
