"""Background attribution jobs with per-method progress.

The page posts a list of methods for one input; a :class:`Job` runs them one
after the other on a single worker thread (the model is shared, so running
methods in parallel would only make each one slower) and the page polls
``/api/jobs/<id>`` for the methods finished so far. Methods whose result is
cached finish at once, when the job is created.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional

__all__ = ["Job", "JobRunner"]


class Job:
    """One input explained by several methods.

    Attributes:
        id: Random hex id (unguessable, so a page only sees its own jobs).
        methods: Method names, in the order requested.
        results: Method name -> result dict of finished methods.
        errors: Method name -> error message of failed methods.
        current: Method running now (``None`` when idle).
    """

    def __init__(self, methods: List[str], payload: Dict[str, Any]) -> None:
        self.id = uuid.uuid4().hex
        self.methods = list(methods)
        self.payload = payload
        self.results: Dict[str, Dict[str, Any]] = {}
        self.errors: Dict[str, str] = {}
        self.current: Optional[str] = None
        self.created = time.time()
        self.finished: Optional[float] = None
        self.cancelled = False
        self._lock = threading.Lock()

    @property
    def done(self) -> int:
        return len(self.results) + len(self.errors)

    @property
    def status(self) -> str:
        if self.done >= len(self.methods):
            return "done"
        return "running" if self.current is not None or self.done else "queued"

    def record(self, name: str, result: Optional[Dict[str, Any]] = None, error: Optional[str] = None) -> None:
        with self._lock:
            if error is not None:
                self.errors[name] = error
            else:
                self.results[name] = result or {}
            if self.done >= len(self.methods):
                self.finished = time.time()

    def snapshot(self) -> Dict[str, Any]:
        with self._lock:
            return {
                "id": self.id, "status": self.status, "total": len(self.methods), "done": self.done,
                "current": self.current, "elapsed": (self.finished or time.time()) - self.created,
                "results": [dict(self.results[m]) for m in self.methods if m in self.results],
                "errors": [{"method": m, "error": self.errors[m]} for m in self.methods if m in self.errors],
            }


class JobRunner:
    """Runs jobs on one background thread and keeps the most recent ones.

    Args:
        run_method: ``run_method(job, method_name) -> result dict``; raising
            records an error for that method (the job goes on with the rest).
        keep: How many jobs to remember.
    """

    def __init__(self, run_method: Callable[[Job, str], Dict[str, Any]], keep: int = 200) -> None:
        self._run_method = run_method
        self._jobs: "OrderedDict[str, Job]" = OrderedDict()
        self._keep = keep
        self._queue: "queue.Queue[Optional[Job]]" = queue.Queue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="prxai-explorer-jobs", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Job:
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > self._keep:
                _, old = self._jobs.popitem(last=False)
                old.cancelled = True
        if job.status != "done":
            self._queue.put(job)
        return job

    def get(self, job_id: str) -> Optional[Job]:
        with self._lock:
            return self._jobs.get(job_id)

    def close(self) -> None:
        self._queue.put(None)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            for name in job.methods:
                if job.cancelled:
                    break
                if name in job.results or name in job.errors:
                    continue
                job.current = name
                try:
                    job.record(name, self._run_method(job, name))
                except Exception as err:  # noqa: BLE001 - reported to the page, the worker goes on
                    job.record(name, error=f"{type(err).__name__}: {err}" if not isinstance(err, ValueError)
                               else str(err))
                finally:
                    job.current = None
