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

Each job belongs to the client (page session) that created it, its
*owner*: only that owner finds it by id. A client has a quota of jobs not
yet finished (:class:`JobQuotaExceeded` beyond it); finished jobs are
forgotten oldest first, those of the client holding the most jobs first,
and a job that has not finished is never forgotten.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple

from captum_prxai.exceptions import PRXAIError

__all__ = ["CANCELLED", "Job", "JobQuotaExceeded", "JobRunner"]

#: Error text of a method dropped or stopped by a cancel.
CANCELLED = "cancelled"


class JobQuotaExceeded(PRXAIError):
    """A client already has as many unfinished jobs as its quota allows (HTTP 429)."""

    status = 429


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
        owner: The client (page session) that created the job; only it finds the job.
        expected_rows: Method name -> inputs its model calls are expected to evaluate in all
            (for the progress of a running method; 0 or missing: unknown).
        rows: Method name -> inputs its model calls have evaluated so far.
        started: Method name -> when it started running (``time.time()``).
        finished_event: Set when every method is recorded.
    """

    def __init__(self, methods: List[str], payload: Dict[str, Any],
                 estimates: Optional[Dict[str, float]] = None, owner: str = "",
                 expected_rows: Optional[Dict[str, int]] = None) -> None:
        self.id = uuid.uuid4().hex
        self.methods = list(methods)
        self.payload = payload
        self.owner = str(owner)
        self.results: Dict[str, Dict[str, Any]] = {}
        self.errors: Dict[str, str] = {}
        self.running: List[str] = []
        self.estimates = dict(estimates or {})
        self.expected_rows = dict(expected_rows or {})
        self.rows: Dict[str, int] = {}
        self.started: Dict[str, float] = {}
        self.created = time.time()
        self.finished: Optional[float] = None
        self.cancel_event = threading.Event()
        self.finished_event = threading.Event()
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
                self.finished_event.set()

    @property
    def is_final(self) -> bool:
        """Whether every method is recorded (the job is done or cancelled)."""
        return self.done >= len(self.methods)

    def add_rows(self, name: str, n: int) -> None:
        """Count ``n`` more inputs evaluated by ``name``'s model calls (the progress of a running method)."""
        with self._lock:
            self.rows[name] = self.rows.get(name, 0) + int(n)

    def _method_progress(self, name: str, now: float) -> Tuple[float, float]:
        """``(fraction done, seconds left)`` of one method not recorded yet.

        A running method's fraction is the inputs its model calls evaluated
        over those expected (at most 0.99 until it is recorded), and its time
        left the elapsed time scaled by that rate; without a count (a one-pass method, or one whose calls are
        not known in advance) the time left is the estimate minus the time
        spent, and the fraction the time spent over the estimate (at most 0.95).
        """
        estimate = float(self.estimates.get(name, 0.0))
        if name not in self.running:
            return 0.0, estimate
        elapsed = max(0.0, now - self.started.get(name, now))
        expected, rows = int(self.expected_rows.get(name, 0) or 0), self.rows.get(name, 0)
        if expected > 1 and rows > 0:
            fraction = min(0.99, rows / expected)
            return fraction, elapsed * (1.0 - fraction) / fraction
        fraction = min(0.95, elapsed / estimate) if estimate > 0 else 0.0
        return fraction, max(0.0, estimate - elapsed)

    def snapshot(self) -> Dict[str, Any]:
        with self._lock:
            now = time.time()
            left = [m for m in self.methods if m not in self.results and m not in self.errors]
            progress = [self._method_progress(m, now) for m in left]
            total = max(1, len(self.methods))
            return {
                "id": self.id, "status": self.status, "total": len(self.methods), "done": self.done,
                "current": self.current, "running": list(self.running), "cancelled": self.cancelled,
                "elapsed": (self.finished or now) - self.created,
                "estimated_seconds_left": sum(p[1] for p in progress),
                "progress": min(1.0, (self.done + sum(p[0] for p in progress)) / total),
                "results": [dict(self.results[m]) for m in self.methods if m in self.results],
                "errors": [{"method": m, "error": self.errors[m]} for m in self.methods if m in self.errors],
            }


class JobRunner:
    """Runs jobs' methods on one background thread per lane and keeps the most recent jobs.

    Args:
        run_method: ``run_method(job, method_name) -> result dict``; raising
            records an error for that method (the job goes on with the rest).
        lane_of: ``lane_of(method_name) -> lane name``; default: one lane.
        keep: How many finished jobs to remember in all; beyond it the oldest
            finished job of the client holding the most jobs is forgotten.
            Unfinished jobs are never forgotten.
        keep_per_owner: How many finished jobs to remember per client (its
            oldest finished ones are forgotten first).
        active_per_owner: Most unfinished jobs one client may have
            (:class:`JobQuotaExceeded` beyond it).
        cancelled: Exception type that means "stopped by a cancel".
    """

    def __init__(self, run_method: Callable[[Job, str], Dict[str, Any]],
                 lane_of: Optional[Callable[[str], str]] = None, keep: int = 200,
                 cancelled: Tuple[type, ...] = (), keep_per_owner: int = 50, active_per_owner: int = 8) -> None:
        self._run_method = run_method
        self._lane_of = lane_of or (lambda name: "main")
        self._jobs: "OrderedDict[str, Job]" = OrderedDict()
        self._keep = keep
        self._keep_per_owner = keep_per_owner
        self._active_per_owner = active_per_owner
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

    def check_quota(self, owner: str) -> None:
        """Raise :class:`JobQuotaExceeded` when ``owner`` already has its quota of unfinished jobs."""
        with self._lock:
            active = sum(1 for j in self._jobs.values() if j.owner == owner and not j.is_final)
        if active >= self._active_per_owner:
            raise JobQuotaExceeded(f"this page already has {active} jobs running or queued, the most one client "
                                   "may have; wait for them or cancel one, then try again.")

    def submit(self, job: Job) -> Job:
        """Remember ``job`` (forgetting old finished jobs) and queue its methods that are not recorded yet.

        Raises:
            JobQuotaExceeded: Its owner already has its quota of unfinished jobs.
        """
        if not job.is_final:
            self.check_quota(job.owner)
        with self._lock:
            self._jobs[job.id] = job
            self._forget_finished()
        for name in job.methods:
            if not job.is_recorded(name):
                self._queue(self._lane_of(name)).put((job, name))
        return job

    def _forget_finished(self) -> None:
        """Drop finished jobs over the per-client and total limits (called with the lock held)."""
        finished: Dict[str, List[str]] = {}
        for job_id, j in self._jobs.items():  # oldest first
            if j.is_final:
                finished.setdefault(j.owner, []).append(job_id)
        for ids in finished.values():
            while len(ids) > self._keep_per_owner:
                self._jobs.pop(ids.pop(0), None)
        while len(self._jobs) > self._keep:
            held = {o: sum(1 for j in self._jobs.values() if j.owner == o) for o, ids in finished.items() if ids}
            if not held:
                return  # every job left is unfinished: none is forgotten
            heaviest = max(held, key=held.__getitem__)
            self._jobs.pop(finished[heaviest].pop(0), None)

    def get(self, job_id: str, owner: Optional[str] = None) -> Optional[Job]:
        """The job with this id, if it is remembered (and, with ``owner``, belongs to that client)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or (owner is not None and job.owner != owner):
            return None
        return job

    def running(self) -> List[Tuple[str, str]]:
        """``(job id, method)`` of every method running now."""
        with self._lock:
            jobs = list(self._jobs.values())
        return [(j.id, m) for j in jobs for m in list(j.running)]

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
            job.started[name] = time.time()
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
