"""The ``ray`` engine: Ray Data with an actor pool of workers.

The driver's planned shards become the blocks of a Ray Dataset (one block a
shard, ``ray.data.from_arrow``); ``map_batches`` runs a callable class on an
actor pool (``ActorPoolStrategy(size=actors)``), so each actor loads the model once
(:class:`~captum_prxai.corpus.worker.Worker`) and explains whole shards, with
``num_cpus`` (also its torch threads) and ``num_gpus`` per actor. Ray
schedules the blocks on the actors; Ray Data restarts an actor that dies
(killed, lost node) and retries its shard, at most :data:`ACTOR_RESTARTS`
times (Ray Data's own default is unbounded), while an exception raised by
our code fails the run at once. Each actor yields its rows batch by batch;
the driver streams them back, counts them, and writes each shard once it is
complete (or a partial shard every ``flush_seconds``), atomically, dropping
rows a retried shard sends again, so no row is written twice and a failed
run keeps every finished shard for the rerun.

Ray joins the cluster at ``address`` (or ``RAY_ADDRESS``) or starts a local
one. On a multi-node cluster every node needs captum-prxai and the model
installed; the output folder is written by the driver only.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from captum_prxai.exceptions import PRXAIError

__all__ = ["ACTOR_RESTARTS", "check_ray", "run_ray"]

#: restarts of a dead actor, and retries of its task, before the run fails (finished shards are kept)
ACTOR_RESTARTS = 3

def check_ray() -> None:
    """Raise a clear error if Ray Data (and pyarrow) are not installed."""
    try:
        import pyarrow  # noqa: F401
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError:
        raise PRXAIError("the ray engine needs Ray Data: pip install 'captum-prxai[ray]' "
                         "(or pip install 'ray[data]' pyarrow).") from None


class _RayWorker:
    """Ray Data callable class: one :class:`Worker` per actor, one shard per call."""

    def __init__(self, worker_kwargs: Dict[str, Any], threads: int) -> None:
        from captum_prxai.corpus.worker import Worker

        self.worker = Worker(**worker_kwargs, device="auto", threads=threads)

    def __call__(self, batch: Any) -> Iterator[Any]:
        """Yield one table per batch of the token budget, so the driver sees progress (and can flush) per batch."""
        import pyarrow as pa

        records = batch.to_pylist()
        shards: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
        for rec in records:  # a batch is one block (= one shard); group anyway in case Ray bundles blocks
            shards[rec.pop("shard")].append(rec)
        for shard, recs in shards.items():
            for rows in self.worker.iter_process(recs):
                yield pa.table({"shard": pa.array([shard] * len(rows), pa.int64()),
                                "payload": pa.array([json.dumps(r) for r in rows], pa.string())})


def _cause(err: BaseException) -> Optional[PRXAIError]:
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, PRXAIError):
            return err
        err = err.__cause__ or err.__context__
    return None


def run_ray(
    shards: Sequence[Sequence[Dict[str, Any]]],
    worker_kwargs: Dict[str, Any],
    on_rows: Callable[[int, List[Dict[str, Any]]], None],
    *,
    actors: int = 1,
    cpus_per_actor: int = 1,
    gpus_per_actor: Optional[float] = None,
    address: Optional[str] = None,
    output: Optional[Path] = None,
) -> None:
    """Explain ``shards`` on Ray Data; call ``on_rows(shard index, rows)`` with the rows of each batch.

    A shard retried after its actor died may send rows again; the caller
    drops those it has (:class:`captum_prxai.corpus.runner._Flusher`).

    Raises:
        PRXAIError: Not enough CPUs/GPUs for the actors, or a failed worker
            (after Ray's restarts and retries).
    """
    if not shards:
        return
    check_ray()
    import logging

    import pyarrow as pa
    import ray

    started = False
    if not ray.is_initialized():
        target = address or os.environ.get("RAY_ADDRESS") or None
        kwargs: Dict[str, Any] = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True)
        if target is None:
            kwargs["num_cpus"] = max(os.cpu_count() or 1, actors * cpus_per_actor)
        try:
            ray.init(address=target, **kwargs)
        except Exception as err:  # ConnectionError, RuntimeError, ...
            raise PRXAIError(f"cannot start or join a Ray cluster (address {target or 'local'}): {err}") from None
        started = True
    try:
        resources = ray.cluster_resources()
        cpus, gpus = float(resources.get("CPU", 0)), float(resources.get("GPU", 0))
        if gpus_per_actor is None:
            gpus_per_actor = 1.0 if gpus >= 1 else 0.0
        if actors * cpus_per_actor > cpus:
            raise PRXAIError(f"{actors} actors x {cpus_per_actor} CPUs need {actors * cpus_per_actor} CPUs, but the "
                             f"Ray cluster has {cpus:g}; lower --actors or --cpus-per-actor.")
        if actors * gpus_per_actor > gpus:
            raise PRXAIError(f"{actors} actors x {gpus_per_actor:g} GPUs need {actors * gpus_per_actor:g} GPUs, but the "
                             f"Ray cluster has {gpus:g}; lower --actors or --gpus-per-actor.")
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # ours counts docs/s
        tables = []
        for index, shard in enumerate(shards):
            tables.append(pa.table({
                "shard": pa.array([index] * len(shard), pa.int64()),
                "row": pa.array([r["row"] for r in shard], pa.int64()),
                "id": pa.array([r["id"] for r in shard], pa.string()),
                "text": pa.array([r["text"] for r in shard], pa.string()),
                "label": pa.array([r["label"] for r in shard], pa.int64()),
                "input_hash": pa.array([r["input_hash"] for r in shard], pa.string()),
            }))
        dataset = ray.data.from_arrow(tables).map_batches(
            _RayWorker,
            fn_constructor_kwargs={"worker_kwargs": worker_kwargs, "threads": cpus_per_actor},
            batch_size=None,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
            max_restarts=ACTOR_RESTARTS,  # Ray Data's default is unbounded (-1)
            max_task_retries=ACTOR_RESTARTS,
        )
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
                grouped: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
                for shard, payload in zip(batch.column("shard").to_pylist(), batch.column("payload").to_pylist()):
                    grouped[shard].append(json.loads(payload))
                for shard, rows in grouped.items():
                    on_rows(shard, rows)
        except PRXAIError:
            raise
        except Exception as err:
            cause = _cause(err)
            if cause is not None:
                raise PRXAIError(str(cause)) from None
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            where = f" in {output}" if output else ""
            raise PRXAIError(f"the ray engine failed ({type(err).__name__}: {first}); the finished shards are kept"
                             f"{where}: rerun the same command to resume.") from err
    finally:
        if started:
            ray.shutdown()
