"""Lazy module attributes (PEP 562): import a sub-module only when one of its names is first used.

``captum_prxai``, :mod:`captum_prxai.models` and :mod:`captum_prxai.viz`
export names whose modules import torch or matplotlib; with
:func:`lazy_exports` the package itself imports nothing heavy, so the command
line starts fast and ``import captum_prxai.viz`` does not pull in matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable, Mapping, Tuple


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    submodules: Iterable[str] = (),
) -> Tuple[Callable[[str], Any], Callable[[], list]]:
    """Module ``__getattr__`` and ``__dir__`` for names imported on first use.

    Args:
        package: The package's ``__name__``.
        exports: Public name -> module that defines it, either absolute
            (``"captum_prxai.attr"``) or relative to ``package`` (``".html"``).
        submodules: Sub-module names reachable as attributes
            (``captum_prxai.graph``) without an explicit import.

    Returns:
        ``(__getattr__, __dir__)``: assign both at module level. A resolved
        name is stored in the package's namespace, so each is looked up once.

    Example::

        __getattr__, __dir__ = lazy_exports(__name__, {"comparison_page": ".html"})
    """
    import sys

    names = dict(exports)
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(names[name], package), name)
        elif name in subs:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list:
        return sorted(set(vars(sys.modules[package])) | set(names) | subs)

    return __getattr__, __dir__
