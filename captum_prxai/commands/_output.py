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

__all__ = ["check_output_dir", "check_output_file", "printable", "write_output"]


def printable(text: Any, newlines: bool = False) -> str:
    """``text`` safe to print on one terminal line: control characters, NUL and undecodable bytes escaped.

    An error message may quote what the user gave (a text, a path, a line of a
    file); printed raw, an escape sequence in it would drive the terminal and a
    newline would break the one-line message. Control characters (C0, DEL,
    C1), other non-printable characters and the surrogates Python uses for
    undecodable bytes (``surrogateescape``) become ``\\xNN``, ``\\uNNNN`` or
    ``\\UNNNNNNNN``: an undecodable byte shows as the byte it was. Printable
    text, non-ASCII letters included, is unchanged. ``newlines=True`` keeps
    line breaks (the command line's own messages indent a command to run on a
    line of its own; quoted input is quoted with :func:`repr` or this function).
    """
    out = []
    for char in str(text):
        code = ord(char)
        if char == " " or char.isprintable() or (newlines and char == "\n"):
            out.append(char)
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that did not decode (surrogateescape): show the byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def _path(path: Any, option: str) -> Path:
    """``path`` as a :class:`Path` (``~`` expanded); a NUL byte, which no file name can hold, is refused."""
    if "\x00" in str(path):
        raise PRXAIError(f"{option} {printable(path)}: a file name cannot hold a NUL byte.")
    return Path(path).expanduser()


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
    target = _path(path, option)
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
    target = _path(path, option)
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
