"""The benchmark's record cache: ``cache.jsonl``, one JSON record per (example, method) and line.

Records are keyed by everything that determines them (:func:`record_key`):
the metric settings, the truncation length and seed, the model's weights,
the dataset, and the method with its effective options and any file it reads.
A record is reused only under the same key, for the same text and label.

The file only grows by whole lines: each record is written with one
``write`` of the complete line, then flushed to disk (``fsync``), under an
exclusive lock. A line cut short by a crash is the file's damaged tail; it is
cut off (with a one-line warning) before anything is appended, so the next
record starts on a line of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

import torch
from torch import nn

from captum_prxai._cache import write_atomic  # noqa: E402  (re-exported: results files are written whole or not at all)

__all__ = ["CACHE_VERSION", "BenchmarkCacheWarning", "RecordCache", "model_fingerprint", "record_key", "write_atomic"]

#: Bumped whenever what a key covers changes: older records are then recomputed, never reused.
CACHE_VERSION = 2

#: (key, example index, method, text hash, gold label): a record is reused only for exactly this
RecordId = Tuple[str, int, str, str, Optional[int]]


class BenchmarkCacheWarning(UserWarning):
    """A damaged line in ``cache.jsonl`` was skipped or cut off."""


def model_fingerprint(model: nn.Module) -> Dict[str, Any]:
    """Name, class and a content hash of every parameter and buffer of ``model``.

    Two models with the same name but other weights (a retrained checkpoint in
    the same folder) get different fingerprints.
    """
    digest = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            flat = tensor.detach().reshape(-1).contiguous().cpu()
            digest.update(f"{name}:{flat.dtype}:{tuple(tensor.shape)};".encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    config = getattr(model, "config", None)
    return {"class": type(model).__name__, "name": str(getattr(config, "_name_or_path", "") or ""),
            "weights": digest.hexdigest()}


def record_key(parts: Mapping[str, Any]) -> str:
    """A short stable hash of ``parts`` (JSON-serialisable, key order irrelevant)."""
    blob = json.dumps({"v": CACHE_VERSION, **parts}, sort_keys=True, default=repr)
    return hashlib.sha1(blob.encode()).hexdigest()[:20]


def _warn(message: str) -> None:
    warnings.warn(BenchmarkCacheWarning(message), stacklevel=3)


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, appends are still whole lines
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


class RecordCache:
    """``cache.jsonl``: read (repairing a damaged tail), append whole lines, clear.

    Args:
        path: The JSON Lines file (created on the first append).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _repair_tail(self, fd: int) -> None:
        """Cut a last line without its newline (a write cut short); the lock must be held."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        start = max(0, size - 1)
        while start > 0:  # find the end of the last complete line
            chunk_start = max(0, start - 65536)
            chunk = os.pread(fd, start - chunk_start, chunk_start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                start = chunk_start + cut + 1
                break
            start = chunk_start
        os.ftruncate(fd, start)
        os.fsync(fd)
        _warn(f"{self.path}: cut off a damaged last line ({size - start} bytes, an interrupted write); "
              "its record is computed again.")

    def read(self, keys: Optional[set] = None) -> Dict[RecordId, Dict[str, Any]]:
        """Records by :data:`RecordId` ``(key, example, method, text_sha, label)``, after cutting off a damaged tail.

        Args:
            keys: Keep only records with these keys (``None``: all).
        """
        done: Dict[RecordId, Dict[str, Any]] = {}
        if not self.path.is_file():
            return done
        try:
            fd = os.open(self.path, os.O_RDWR)
        except PermissionError:  # a read-only cache (e.g. summarising a finished run): read, repair nothing
            data = self.path.read_bytes()
        else:
            try:
                with _locked(fd):
                    self._repair_tail(fd)
                    with open(fd, "rb", closefd=False) as fh:
                        fh.seek(0)
                        data = fh.read()
            finally:
                os.close(fd)
        damaged = []
        for line_no, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                label = rec.get("label")
                rid = (str(rec["config_key"]), int(rec["example"]), str(rec["method"]), str(rec["text_sha"]),
                       None if label is None else int(label))
            except (ValueError, KeyError, TypeError):
                damaged.append(line_no)
                continue
            if keys is None or rid[0] in keys:
                done[rid] = rec
        if damaged:
            _warn(f"{self.path}: skipped {len(damaged)} damaged line(s) (first: line {damaged[0]}); "
                  "their records are computed again.")
        return done

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record as one whole line: a single ``write``, then ``fsync``."""
        line = (json.dumps(record) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            with _locked(fd):
                self._repair_tail(fd)
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
        finally:
            os.close(fd)

    def clear(self) -> None:
        """Remove the file (a run that does not resume)."""
        if self.path.exists():
            self.path.unlink()
