"""The plugin's core stands apart from its apps, and its packaging says so.

The core is what a Captum user imports: the attribution methods (``captum_prxai.attr``), attention capture
(``captum_prxai.capture``, ``captum_prxai.hooks``), the graph and PageRank (``captum_prxai.graph``) and the
faithfulness metrics (``captum_prxai.metrics``). The apps are the benchmark, the explorer, the command line and the
visualisation. The core must import nothing from the apps, and must work without the apps' third-party
dependencies (Flask, matplotlib), which ``pyproject.toml`` therefore keeps out of the core dependencies.
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "captum_prxai"

CORE = ("captum_prxai.attr", "captum_prxai.capture", "captum_prxai.hooks", "captum_prxai.graph", "captum_prxai.metrics",
        "captum_prxai.recommended", "captum_prxai.conservative")
# A module is an app module when any part of its dotted name is one of these (so a move such as
# captum_prxai.apps.bench is still recognised).
APP_PARTS = frozenset({"bench", "explorer", "commands", "viz", "cli"})
APP_ONLY_DISTRIBUTIONS = ("flask", "matplotlib")


# --------------------------------------------------------------------------------------------------
# (a) The core imports, and attributes, with Flask and matplotlib unimportable.
# --------------------------------------------------------------------------------------------------

#: Run first in a subprocess: makes the named top-level packages unimportable, as if not installed.
_BLOCKER = textwrap.dedent(
    """
    import importlib.abc
    import sys

    # Captum itself imports matplotlib (captum.attr's visualisation), so it is imported first; from then on
    # the blocked packages cannot be imported. transformers is imported only after the blocker is in place,
    # so its probes for optional packages (accelerate, ...) find them absent, as in an install without them.
    import captum.attr  # noqa: F401
    import torch

    BLOCKED = {blocked!r}

    class Absent(importlib.abc.MetaPathFinder):
        # Wraps each finder: a blocked name is not found (find_spec returns None, so importing it raises
        # ModuleNotFoundError and probes such as importlib.util.find_spec see it as absent); everything
        # else, package metadata included, goes to the wrapped finder.
        def __init__(self, inner):
            self.inner = inner

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                return None
            find = getattr(self.inner, "find_spec", None)
            return find(name, path, target) if find else None

        def __getattr__(self, attr):
            return getattr(self.inner, attr)

    for name in [m for m in sys.modules if m.partition(".")[0] in BLOCKED]:
        del sys.modules[name]
    sys.meta_path[:] = [Absent(finder) for finder in sys.meta_path]
    importlib.invalidate_caches()
    for name in BLOCKED:
        try:
            __import__(name)
        except ImportError:
            pass
        else:
            raise SystemExit(f"the blocker did not block {{name}}")

    def loaded(prefixes):
        return sorted(m for m in sys.modules if m.partition(".")[0] in prefixes)
    """
)

_CORE_WORKS = textwrap.dedent(
    """
    import transformers

    import captum_prxai.attr
    import captum_prxai.capture
    import captum_prxai.graph
    import captum_prxai.hooks
    import captum_prxai.metrics
    from captum_prxai import PRAttentionGradient, attention_layers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=64, num_labels=3)
    model = transformers.BertForSequenceClassification(config).eval()
    ids = torch.randint(2, 50, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0

    def forward(input_ids, attention_mask):
        return model(input_ids, attention_mask=attention_mask).logits

    scores = PRAttentionGradient(forward, attention_layers(model)).attribute(
        ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    assert scores.shape == ids.shape, scores.shape
    assert torch.allclose(scores.sum(-1), torch.ones(2), atol=1e-5), scores.sum(-1)
    assert bool((scores[1, 5:] == 0).all()), scores[1]

    loaded_apps = sorted(m for m in sys.modules if m.startswith("captum_prxai.")
                         and APP_PARTS.intersection(m.split(".")[1:]))
    assert not loaded_apps, loaded_apps
    assert not loaded(BLOCKED), loaded(BLOCKED)
    print("core works without", sorted(BLOCKED))
    """
)


def _run_blocked(blocked: set[str], body: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    code = f"APP_PARTS = {set(APP_PARTS)!r}\n" + _BLOCKER.format(blocked=blocked) + body
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})


def test_core_imports_and_attributes_without_flask_and_matplotlib():
    proc = _run_blocked(set(APP_ONLY_DISTRIBUTIONS), _CORE_WORKS)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert "core works without ['flask', 'matplotlib']" in proc.stdout, proc.stdout


#: Every extra's packages and the test tools. (matplotlib comes with Captum, but explaining a sentence, even as
#: an HTML page, must not need it: only the graph drawings of the viz extra do.)
NOT_IN_THE_CORE_INSTALL = {"flask", "matplotlib", "gguf", "accelerate", "ray", "pyarrow", "pytest", "IPython",
                           "nbclient", "nbformat", "ipykernel"}


def test_the_readme_explain_command_needs_no_extra(tmp_path):
    """The quick start installs the core only (``pip install torch==2.13.0 -e .``): its ``captum-prxai explain``
    step, with ``--html``, must run with every extra's packages absent."""
    from test_readme import quick_start_commands

    install = quick_start_commands()[0]
    explain = next(part.strip() for part in install.split("&&") if part.strip().startswith("captum-prxai explain"))
    argv = shlex.split(explain)[1:]
    html = tmp_path / "explanation.html"
    argv[argv.index("--html") + 1] = str(html)
    body = textwrap.dedent(f"""
        from captum_prxai.cli import main
        rc = main({argv!r})
        assert not loaded(BLOCKED), loaded(BLOCKED)
        raise SystemExit(rc)
        """)
    proc = _run_blocked(NOT_IN_THE_CORE_INSTALL, body)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    page = html.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "gripping" in page, page[:300]


# --------------------------------------------------------------------------------------------------
# (b) The import graph: nothing the core imports, directly or through other modules, at module level or
# inside a function, is an app module.
# --------------------------------------------------------------------------------------------------


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "captum_prxai":
        return None
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_app(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "captum_prxai" and bool(APP_PARTS.intersection(parts[1:]))


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


_LOADERS = frozenset({"import_module", "__import__", "lazy_exports"})


def _is_module_name(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def imported_names(path: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` for every import in ``path``: statements anywhere (inside functions, ``try``,
    ``if TYPE_CHECKING``); module names, absolute or relative, handed to ``importlib.import_module``,
    ``__import__`` or ``lazy_exports``; and any other string constant (not a docstring) that is an absolute
    ``captum_prxai`` module name, as lazy-export tables hold."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    docstrings = _docstring_nodes(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.append((node.lineno, base))
            # ``from captum_prxai import bench`` imports a sub-module.
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names
                      if _module_file(f"{base}.{alias.name}") is not None]
        elif isinstance(node, ast.Call):
            func = node.func
            if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) in _LOADERS:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    for const in ast.walk(arg):
                        if isinstance(const, ast.Constant) and isinstance(const.value, str) \
                                and const.value.startswith(".") and _is_module_name(const.value[1:]):
                            found.append((const.lineno, ".".join(package + [const.value[1:]])))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value.startswith("captum_prxai.") and _is_module_name(node.value):
                found.append((node.lineno, node.value))
    return found


def core_import_violations() -> list[str]:
    """Walk the import graph from the core; return ``file:line`` chains that reach an app module."""
    seen: dict[str, tuple[str, int] | None] = {}
    queue = []
    for name in CORE:
        assert _module_file(name) is not None, f"core module {name} not found: update CORE in this test"
        seen[name] = None
        queue.append(name)
    # A package's sub-modules are part of it.
    for name in CORE:
        path = _module_file(name)
        if path is not None and path.name == "__init__.py":
            for sub in sorted(path.parent.rglob("*.py")):
                sub_name = _module_name(sub)
                if sub_name not in seen:
                    seen[sub_name] = None
                    queue.append(sub_name)
    violations = []
    while queue:
        name = queue.pop(0)
        path = _module_file(name)
        if path is None:
            continue
        for line, target in imported_names(path):
            if not target.startswith("captum_prxai"):
                continue
            # Importing a.b.c runs a, a.b and a.b.c.
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                candidate = ".".join(parts[:i])
                if _module_file(candidate) is None:
                    break
                if _is_app(candidate):
                    chain = [f"{path.relative_to(ROOT)}:{line} imports {target}"]
                    back = seen.get(name)
                    while back is not None:
                        parent, parent_line = back
                        chain.append(f"{_module_file(parent).relative_to(ROOT)}:{parent_line}")
                        back = seen.get(parent)
                    if not any(v.startswith(chain[0].split(" imports ")[0] + " ") for v in violations):
                        violations.append(" <- ".join(chain))
                    break
                if candidate not in seen:
                    seen[candidate] = (name, line)
                    queue.append(candidate)
    return violations


def test_core_imports_nothing_from_the_apps():
    violations = core_import_violations()
    assert not violations, "the core imports app modules:\n" + "\n".join(violations)


def test_import_graph_check_sees_function_level_and_lazy_imports(tmp_path, monkeypatch):
    """The checker itself: an import inside a function, a relative import and an import_module string are
    all found (else the test above could pass while the core imports an app)."""
    pkg = tmp_path / "captum_prxai"
    (pkg / "attr").mkdir(parents=True)
    (pkg / "bench").mkdir()
    for folder in (pkg, pkg / "attr", pkg / "bench"):
        (folder / "__init__.py").write_text("")
    for name in ("capture", "hooks", "graph", "metrics", "recommended", "conservative"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "helpers.py").write_text(
        "import importlib\n\ndef f():\n    return importlib.import_module('captum_prxai.viz')\n")
    (pkg / "viz.py").write_text("")
    (pkg / "attr" / "a.py").write_text("def g():\n    from ..bench import runner\n")
    (pkg / "attr" / "b.py").write_text("from captum_prxai import helpers\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = core_import_violations()
    assert any(v.startswith("captum_prxai/attr/a.py:2 imports captum_prxai.bench") for v in found), found
    assert any(v.startswith("captum_prxai/helpers.py:4 imports captum_prxai.viz")
               and "captum_prxai/attr/b.py:1" in v for v in found), found


# --------------------------------------------------------------------------------------------------
# pyproject.toml: torch is a range, the apps' dependencies are extras.
# --------------------------------------------------------------------------------------------------


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _requirement_name(spec: str) -> str:
    name = spec.split(";")[0]
    for stop in "[<>=!~ ":
        name = name.split(stop)[0]
    return name.strip().lower()


def test_core_dependencies_pin_no_exact_torch_and_leave_app_dependencies_to_extras():
    deps = _project()["dependencies"]
    names = {_requirement_name(d) for d in deps}
    assert {"torch", "captum", "transformers", "numpy"} <= names, deps
    torch_spec = next(d for d in deps if _requirement_name(d) == "torch")
    assert "==" not in torch_spec and ">=" in torch_spec, torch_spec
    for app_only in ("flask", "pytest", "gguf", "accelerate", "ray", "pyarrow", "ipykernel", "nbclient"):
        assert app_only not in names, f"{app_only} belongs in an extra, not the core dependencies"


@pytest.mark.parametrize("extra,needs", [
    ("explorer", "flask"), ("viz", "matplotlib"), ("bench", "matplotlib"),
    ("decoder", "gguf"), ("decoder", "accelerate"),
    ("ray", "ray"), ("dataset", "pyarrow"), ("dev", "pytest"),
])
def test_each_extra_brings_what_it_is_named_for(extra, needs):
    extras = _project()["optional-dependencies"]
    assert needs in {_requirement_name(d) for d in extras[extra]}, extras[extra]


def test_all_covers_every_extra_and_dev_covers_all():
    extras = _project()["optional-dependencies"]
    (all_spec,) = [d for d in extras["all"] if d.startswith("captum-prxai[")]
    in_all = set(all_spec[len("captum-prxai["):all_spec.index("]")].split(","))
    assert in_all == set(extras) - {"all", "dev"}, in_all
    assert "captum-prxai[all]" in extras["dev"], extras["dev"]


def test_license_file_matches_the_declared_licence():
    project = _project()
    assert project["license"] == "BSD-3-Clause"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License") and "The captum-prxai authors" in text
