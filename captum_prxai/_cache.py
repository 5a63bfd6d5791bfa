"""Where captum-prxai keeps downloaded data, trained models and benchmark caches."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable that overrides the cache root.
CACHE_ENV_VAR = "CAPTUM_PRXAI_CACHE"


def cache_dir(*parts: str, create: bool = True) -> Path:
    """Return ``$CAPTUM_PRXAI_CACHE/<parts...>`` (default ``~/.cache/captum-prxai``).

    Args:
        *parts: Sub-folders below the cache root.
        create: Create the folder if it does not exist.
    """
    root = Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "captum-prxai")
    path = root.joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
