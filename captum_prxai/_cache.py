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


def write_atomic(path: "str | Path", data: "str | bytes", encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``data`` all at once: write a temporary file beside it, flush it to disk, rename.

    A reader (or a run killed part-way) sees the old file or the new one,
    never a half-written one.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    import tempfile

    path = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
