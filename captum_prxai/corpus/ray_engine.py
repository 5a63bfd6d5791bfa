"""The ``ray`` engine: Ray Data with an actor pool of workers.

The driver's planned shards become the blocks of a Ray Dataset (one block a
shard, ``ray.data.from_arrow``); ``map_batches`` runs a callable class on an
actor pool (``ActorPoolStrategy(size=actors)``), so each actor loads the model once
(:class:`~captum_prxai.corpus.worker.Worker`) and explains whole shards, with
``num_cpus`` (also its torch threads) and ``num_gpus`` per actor. Ray
schedules the blocks on the actors; Ray Data restarts an actor that dies
(killed, lost node) and retries its shard on another (its defaults for actor
pools: unlimited restarts and retries of system failures), while an
exception raised by our code fails the run at once; the driver streams the
results back and writes each shard once it is complete, atomically, so a
retried shard is never written twice and a failed run keeps every finished
shard for the rerun.

Ray joins the cluster at ``address`` (or ``RAY_ADDRESS``) or starts a local
one. On a multi-node cluster every node needs captum-prxai and the model
installed; the output folder is written by the driver only.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from captum_prxai.exceptions import PRXAIError

__all__ = ["check_ray", "run_ray"]

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

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        records = batch.to_pylist()
        shards: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
        for rec in records:  # a batch is one block (= one shard); group anyway in case Ray bundles blocks
            shards[rec.pop("shard")].append(rec)
        out_shard, payload = [], []
        for shard, recs in shards.items():
            for row in self.worker.process(recs):
                out_shard.append(shard)
                payload.append(json.dumps(row))
        return pa.table({"shard": pa.array(out_shard, pa.int64()), "payload": pa.array(payload, pa.string())})


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
    finish: Callable[[List[Dict[str, Any]]], None],
    *,
    actors: int = 1,
    cpus_per_actor: int = 1,
    gpus_per_actor: Optional[float] = None,
    address: Optional[str] = None,
    output: Optional[Path] = None,
) -> None:
    """Explain ``shards`` on Ray Data; call ``finish(rows)`` with each complete shard.

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
        tables, expected = [], {}
        for index, shard in enumerate(shards):
            expected[index] = len(shard)
            tables.append(pa.table({
                "shard": pa.array([index] * len(shard), pa.int64()),
                "row": pa.array([r["row"] for r in shard], pa.int64()),
                "id": pa.array([r["id"] for r in shard], pa.string()),
                "text": pa.array([r["text"] for r in shard], pa.string()),
                "label": pa.array([r["label"] for r in shard], pa.int64()),
            }))
        dataset = ray.data.from_arrow(tables).map_batches(
            _RayWorker,
            fn_constructor_kwargs={"worker_kwargs": worker_kwargs, "threads": cpus_per_actor},
            batch_size=None,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
        )
        pending: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
                for shard, payload in zip(batch.column("shard").to_pylist(), batch.column("payload").to_pylist()):
                    pending[shard].append(json.loads(payload))
                    if len(pending[shard]) == expected[shard]:
                        finish(pending.pop(shard))
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
        if pending:
            raise PRXAIError(f"the ray engine returned incomplete shards {sorted(pending)}; rerun to resume.")
    finally:
        if started:
            ray.shutdown()
