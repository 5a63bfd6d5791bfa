"""Peak memory of one attribution call, and the one reader of this process's resident memory."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from typing import Optional

import torch

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> Optional[int]:
    """Resident memory of this process in bytes (Linux ``/proc/self/statm``), or ``None`` where unavailable."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def reset_peak_rss() -> None:
    """Reset the kernel's resident-memory high-water mark (``VmHWM``, Linux), so what came before does not count."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def peak_rss_bytes() -> int:
    """Peak resident memory of this process in bytes: ``VmHWM`` (Linux), else ``ru_maxrss``."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """Context manager measuring the peak memory used above the starting level.

    * CUDA device: ``torch.cuda.max_memory_allocated`` above the allocation at
      entry (exact, tensors only).
    * CPU on Linux: peak resident set size above the level at entry, sampled
      every ``interval`` seconds by a background thread (torch's CPU allocator
      is invisible to :mod:`tracemalloc`). Memory the process already holds
      and reuses is not counted, so this is a lower bound.
    * Elsewhere: :mod:`tracemalloc` peak (Python allocations only).

    After exit, :attr:`peak_bytes` holds the result and :attr:`kind` says
    which measurement was used (``"cuda"``, ``"rss"`` or ``"tracemalloc"``).
    """

    def __init__(self, device: Optional[torch.device] = None, interval: float = 0.002) -> None:
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.interval = interval
        self.peak_bytes = 0
        self.kind = "rss"
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._start = 0
        self._max = 0

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda" and torch.cuda.is_available():
            self.kind = "cuda"
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            return self
        start = rss_bytes()
        if start is None:
            self.kind = "tracemalloc"
            self._was_tracing = tracemalloc.is_tracing()
            if not self._was_tracing:
                tracemalloc.start()
            tracemalloc.reset_peak()
            self._start = tracemalloc.get_traced_memory()[0]
            return self
        self.kind = "rss"
        self._start = self._max = start
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss = rss_bytes()
            if rss is not None and rss > self._max:
                self._max = rss
            time.sleep(self.interval)

    def __exit__(self, *exc) -> None:
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = max(0, torch.cuda.max_memory_allocated(self.device) - self._start)
        elif self.kind == "tracemalloc":
            self.peak_bytes = max(0, tracemalloc.get_traced_memory()[1] - self._start)
            if not self._was_tracing:
                tracemalloc.stop()
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            rss = rss_bytes()
            if rss is not None and rss > self._max:
                self._max = rss
            self.peak_bytes = max(0, self._max - self._start)
