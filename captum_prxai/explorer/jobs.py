"""Background attribution jobs with per-method progress and cancellation.

The page posts a list of methods for one input; a :class:`Job` holds them
and a :class:`JobRunner` runs each method on the worker of its *lane*: one
worker for the one-pass methods and the graph view (``"fast"``), one for the
many-pass methods (``"slow"``: Integrated Gradients, the perturbation
methods). So a long Shapley run delays only the many-pass methods queued
after it, and a PR-G heatmap of another tab is computed meanwhile. The page
polls ``/api/jobs/<id>`` for the methods finished so far, and can cancel a
job (``POST /api/jobs/<id>/cancel``): methods not started are dropped, and
the running one stops at its next model call. Methods whose result is
cached finish at once, when the job is created.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["CANCELLED", "Job", "JobRunner"]

#: Error text of a method dropped or stopped by a cancel.
CANCELLED = "cancelled"


class Job:
    """One input explained by several methods.

    Attributes:
        id: Random hex id (unguessable, so a page only sees and cancels its own jobs).
        methods: Method names, in the order requested.
        results: Method name -> result dict of finished methods.
        errors: Method name -> error message of failed (or cancelled) methods.
        running: Methods running now (at most one per lane).
        cancel_event: Set by :meth:`cancel`; the engine checks it before every model call.
        estimates: Method name -> estimated seconds (from the engine), for the progress line.
    """

    def __init__(self, methods: List[str], payload: Dict[str, Any],
                 estimates: Optional[Dict[str, float]] = None) -> None:
        self.id = uuid.uuid4().hex
        self.methods = list(methods)
        self.payload = payload
        self.results: Dict[str, Dict[str, Any]] = {}
        self.errors: Dict[str, str] = {}
        self.running: List[str] = []
        self.estimates = dict(estimates or {})
        self.created = time.time()
        self.finished: Optional[float] = None
        self.cancel_event = threading.Event()
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    @property
    def current(self) -> Optional[str]:
        """The first running method (``None`` when none runs)."""
        running = list(self.running)
        return running[0] if running else None

    @property
    def done(self) -> int:
        return len(self.results) + len(self.errors)

    @property
    def status(self) -> str:
        """``"queued"``, ``"running"``, ``"done"`` or ``"cancelled"`` (the last two are final)."""
        if self.done >= len(self.methods):
            return "cancelled" if self.cancelled and CANCELLED in self.errors.values() else "done"
        return "running" if self.running or self.done else "queued"

    def cancel(self) -> None:
        """Stop the job: the running methods stop at their next model call, the others are dropped."""
        self.cancel_event.set()

    def is_recorded(self, name: str) -> bool:
        with self._lock:
            return name in self.results or name in self.errors

    def record(self, name: str, result: Optional[Dict[str, Any]] = None, error: Optional[str] = None) -> None:
        with self._lock:
            if name in self.results or name in self.errors:
                return
            if error is not None:
                self.errors[name] = error
            else:
                self.results[name] = result or {}
            if self.done >= len(self.methods):
                self.finished = time.time()

    def snapshot(self) -> Dict[str, Any]:
        with self._lock:
            left = [m for m in self.methods if m not in self.results and m not in self.errors]
            return {
                "id": self.id, "status": self.status, "total": len(self.methods), "done": self.done,
                "current": self.current, "running": list(self.running), "cancelled": self.cancelled,
                "elapsed": (self.finished or time.time()) - self.created,
                "estimated_seconds_left": sum(self.estimates.get(m, 0.0) for m in left),
                "results": [dict(self.results[m]) for m in self.methods if m in self.results],
                "errors": [{"method": m, "error": self.errors[m]} for m in self.methods if m in self.errors],
            }


class JobRunner:
    """Runs jobs' methods on one background thread per lane and keeps the most recent jobs.

    Args:
        run_method: ``run_method(job, method_name) -> result dict``; raising
            records an error for that method (the job goes on with the rest).
        lane_of: ``lane_of(method_name) -> lane name``; default: one lane.
        keep: How many jobs to remember (older ones are cancelled and forgotten).
        cancelled: Exception type that means "stopped by a cancel".
    """

    def __init__(self, run_method: Callable[[Job, str], Dict[str, Any]],
                 lane_of: Optional[Callable[[str], str]] = None, keep: int = 200,
                 cancelled: Tuple[type, ...] = ()) -> None:
        self._run_method = run_method
        self._lane_of = lane_of or (lambda name: "main")
        self._jobs: "OrderedDict[str, Job]" = OrderedDict()
        self._keep = keep
        self._cancelled = cancelled
        self._queues: Dict[str, "queue.Queue[Optional[Tuple[Job, str]]]"] = {}
        self._threads: Dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def _queue(self, lane: str) -> "queue.Queue[Optional[Tuple[Job, str]]]":
        with self._lock:
            if lane not in self._queues:
                q: "queue.Queue[Optional[Tuple[Job, str]]]" = queue.Queue()
                thread = threading.Thread(target=self._work, args=(q,), name=f"prxai-explorer-{lane}", daemon=True)
                self._queues[lane], self._threads[lane] = q, thread
                thread.start()
            return self._queues[lane]

    def submit(self, job: Job) -> Job:
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > self._keep:
                _, old = self._jobs.popitem(last=False)
                old.cancel()
        for name in job.methods:
            if not job.is_recorded(name):
                self._queue(self._lane_of(name)).put((job, name))
        return job

    def get(self, job_id: str) -> Optional[Job]:
        with self._lock:
            return self._jobs.get(job_id)

    def cancel(self, job: Job) -> None:
        """Cancel ``job`` and record its methods that have not started as cancelled."""
        job.cancel()
        for name in job.methods:
            if name not in job.running:
                job.record(name, error=CANCELLED)

    def queued(self) -> Dict[str, int]:
        """Lane -> methods waiting in it."""
        with self._lock:
            return {lane: q.qsize() for lane, q in self._queues.items()}

    def close(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
        for q in queues:
            q.put(None)

    def _work(self, q: "queue.Queue[Optional[Tuple[Job, str]]]") -> None:
        while True:
            item = q.get()
            if item is None:
                return
            job, name = item
            if job.is_recorded(name):
                continue
            if job.cancelled:
                job.record(name, error=CANCELLED)
                continue
            job.running.append(name)
            try:
                job.record(name, self._run_method(job, name))
            except self._cancelled:
                job.record(name, error=CANCELLED)
            except Exception as err:  # noqa: BLE001 - reported to the page, the worker goes on
                job.record(name, error=f"{type(err).__name__}: {err}" if not isinstance(err, ValueError)
                           else str(err))
            finally:
                job.running.remove(name)
