"""The packages import one another only as ARCHITECTURE.md's table of layers says.

The table is the contract a maintainer reads; this test reads the same table, so a new edge
is either written down there, with its reason, or refused here naming the module and line.
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "taskcell"


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
