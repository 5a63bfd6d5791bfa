"""Checks on the command line's output paths, made before a command starts its work.

A command that writes files (``explain --html/--json/--graph``,
``benchmark --out``) calls :func:`check_output_file` or
:func:`check_output_dir` while it parses its arguments, so a path that cannot
be written stops it at once with one line, rather than after minutes of
attribution; :func:`write_output` then writes, turning a late file-system
error into the same kind of one-line message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from captum_prxai.exceptions import PRXAIError

__all__ = ["check_output_dir", "check_output_file", "write_output"]


def _writable_ancestor(target: Path, option: str, given: Any) -> None:
    """The nearest existing folder above ``target`` must be a folder we may write in."""
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise PRXAIError(f"{option} {given}: cannot make its folder, {folder} is a file.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PRXAIError(f"{option} {given}: cannot write in {folder} (no write permission); choose another place.")


def check_output_file(path: Any, option: str, formats: Optional[Sequence[str]] = None) -> Path:
    """Refuse an output file that cannot be written.

    Args:
        path: The path given on the command line.
        option: The option's name, for the message (``"--html"``).
        formats: Accepted file extensions (without the dot), if the option has a format.

    Returns:
        The path (``~`` expanded).

    Raises:
        PRXAIError: ``path`` is a folder, cannot be overwritten, its folder
            cannot be made or written (a file stands in its way, or no write
            permission), or its extension is not one of ``formats``.
    """
    target = Path(path).expanduser()
    if formats is not None:
        ext = target.suffix.lower().lstrip(".")
        if ext not in formats:
            shown = f"'.{ext}'" if ext else "no extension"
            raise PRXAIError(f"{option} {path}: unknown figure format ({shown}); end the file name with "
                             f"{', '.join('.' + f for f in formats)}.")
    if target.is_dir():
        raise PRXAIError(f"{option} {path} is a folder; give a file name, e.g. {option} {target / 'out'}"
                         f"{'.' + formats[0] if formats else ''}.")
    if target.exists() and not os.access(target, os.W_OK):
        raise PRXAIError(f"{option} {path}: the file exists and cannot be overwritten (no write permission).")
    _writable_ancestor(target, option, path)
    return target


def check_output_dir(path: Any, option: str) -> Path:
    """Refuse an output folder that cannot be made or written (see :func:`check_output_file`).

    Raises:
        PRXAIError: ``path`` is a file, or it cannot be made or written in.
    """
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise PRXAIError(f"{option} {path} is a file; give a folder (it is made if missing).")
    if target.is_dir():
        if not os.access(target, os.W_OK | os.X_OK):
            raise PRXAIError(f"{option} {path}: cannot write in it (no write permission); choose another place.")
        return target
    _writable_ancestor(target, option, path)
    return target


def write_output(path: Path, option: str, write: Callable[[Path], Any]) -> None:
    """Make ``path``'s folder, run ``write(path)`` and say ``wrote PATH``.

    Raises:
        PRXAIError: The file system refused (disk full, permission changed
            since :func:`check_output_file`).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except OSError as err:
        raise PRXAIError(f"{option} {path}: could not write it ({err.strerror or err}).") from None
    print(f"wrote {path}")
