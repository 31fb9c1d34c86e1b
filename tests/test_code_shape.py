"""Code shape: no function in the project's packages is longer than ``MAX_FUNCTION_LINES``.

A function that long does several jobs; split it by what it does. Lines are counted from
the ``def`` line (decorators excluded) to the function's last line, docstring and comments
included. Nested functions count within their enclosing function and on their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "serverless", "ingestion", "optimizers", "tasks", "flows", "trainwise")
MAX_FUNCTION_LINES = 90


def _functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, length in lines) of every function and method in ``path``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "")
    return found


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_the_packages_have_modules_to_check() -> None:
    modules = _modules()
    assert {path.relative_to(ROOT).parts[0] for path in modules} == set(PACKAGES)


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = [
        f"{path.relative_to(ROOT)}:{name} ({lines} lines)"
        for path in _modules()
        for name, lines in _functions(path)
        if lines > MAX_FUNCTION_LINES
    ]
    assert not too_long, f"functions longer than {MAX_FUNCTION_LINES} lines (split them by job): " + "; ".join(too_long)


def test_the_measure_counts_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"class A:\n    def method(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n")
    assert _functions(source) == [("A.method", MAX_FUNCTION_LINES + 1)]
