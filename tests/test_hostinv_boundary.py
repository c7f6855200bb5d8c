"""hostinv stands on its own: it never imports remote_acp (DESIGN §2) and imports asyncssh only
where a probe runs, so importing it (and the CLI's --version) stays cheap."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import hostinv

ROOT = Path(hostinv.__file__).parent
SCRIPT = """
import json, pkgutil, sys, importlib
import hostinv
names = [m.name for m in pkgutil.walk_packages(hostinv.__path__, "hostinv.")]
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"remote_acp", "asyncssh"})
print(json.dumps({"modules": names, "loaded": loaded}))
"""


def imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in {
            "import_module",
            "__import__",
        }:
            found.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return found


def test_importing_every_hostinv_module_loads_neither_remote_acp_nor_asyncssh() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "hostinv.selectors" in report["modules"]  # the walk did see the package
    assert report["loaded"] == []


def test_no_hostinv_source_file_imports_remote_acp() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert ROOT / "selectors.py" in files
    offenders = [
        f"{path.relative_to(ROOT.parent)}: {module}"
        for path in files
        for module in imported_modules(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if module.split(".")[0] == "remote_acp"
    ]
    assert offenders == []


def test_the_scan_sees_every_form_of_import() -> None:
    tree = ast.parse(
        "import remote_acp\nfrom remote_acp.errors import X\nimport a.b as c\n"
        "def f():\n    import remote_acp.session\n    importlib.import_module('remote_acp.cli')\n"
        "from . import sibling\n"
    )
    assert imported_modules(tree) == {"remote_acp", "remote_acp.errors", "a.b", "remote_acp.session", "remote_acp.cli"}


def test_public_names_resolve_and_all_is_sorted() -> None:
    assert list(hostinv.__all__) == sorted(hostinv.__all__)
    for name in hostinv.__all__:
        assert getattr(hostinv, name) is not None
    # every module says what it exports (a package's __init__ may only describe its modules)
    for module in pkgutil.walk_packages(hostinv.__path__, "hostinv."):
        if not module.ispkg or module.name == "hostinv.inventory":
            imported = importlib.import_module(module.name)
            exported = getattr(imported, "__all__", None)
            assert exported is not None, f"{module.name} has no __all__"
            assert all(hasattr(imported, name) for name in exported), module.name
