"""The ``ray`` engine: Ray Data with an actor pool of workers.

Input. For a CSV, JSON Lines (UTF-8) or Parquet file, Ray Data reads the
texts itself (``ray.data.read_csv`` / ``read_json`` / ``read_parquet``): the
driver only streams the file once to check it and keeps each row's id,
label and a hash of its text, never the texts. The texts are zipped, row by
row and in input order, with the driver's plan (row, shard, id, label,
hashes), the rows already done are dropped, and the result is materialized
in Ray's object store (which spills to disk) before the actors start; each
actor checks every text against the driver's hash, so a parser that read
another text stops the run instead of explaining the wrong row. A packaged
dataset (small, already in memory) becomes one block a shard
(``ray.data.from_arrow``).

Work. ``map_batches`` runs a callable class on an actor pool
(``ActorPoolStrategy(size=actors)``), so each actor loads the model once
(:class:`~captum_prxai.corpus.worker.Worker`), with ``num_cpus`` (also its
torch threads) and ``num_gpus`` per actor, and yields its rows batch by
batch; the driver streams them back, counts them, and writes each shard
once it is complete (or a partial shard every ``flush_seconds``),
atomically.

Failures. An exception raised by our code fails the run at once. Ray does
not restart actors itself (``max_restarts=0``: with restarts on, Ray logs an
error-level line for every actor of the pool); when a worker is lost (killed,
out of memory, lost node), the driver runs the texts not yet returned on new
actors, at most :data:`ACTOR_RESTARTS` times, and drops rows it already has,
so no row is written twice; a failed run keeps every finished shard for the
rerun.

Ray joins the cluster at ``address`` (or ``RAY_ADDRESS``) or starts a local
one. On a multi-node cluster every node needs captum-prxai, the model and the
input file (at the same path) installed; the output folder is written by
the driver only.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from captum_prxai.corpus.io import JSONL_SUFFIXES, PARQUET_SUFFIXES
from captum_prxai.exceptions import PRXAIError

__all__ = ["ACTOR_RESTARTS", "check_ray", "ray_reads", "run_ray"]

#: times the driver starts new actors for the texts left after a Ray worker was lost, before the run fails
#: (finished shards are kept)
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
    """Ray Data callable class: one :class:`Worker` per actor (its arguments: class attributes), one shard per call."""

    worker_kwargs: Dict[str, Any] = {}
    threads: int = 1

    def __init__(self) -> None:
        from captum_prxai.corpus.worker import Worker

        self.worker = Worker(**self.worker_kwargs, device="auto", threads=self.threads)

    def __call__(self, batch: Any) -> Iterator[Any]:
        """Yield one table per batch of the token budget, so the driver sees progress (and can flush) per batch."""
        import pyarrow as pa

        from captum_prxai.corpus.io import text_digest

        records = batch.to_pylist()
        shards: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
        for rec in records:  # rows of one or a few shards (sorted by shard): group them
            digest = rec.pop("digest", None)
            if digest is not None and text_digest(rec["text"]) != digest:
                raise PRXAIError(
                    f"row {rec['row']} (id {rec['id']!r}): the text Ray's reader read is not the one the driver read "
                    "(the input file changed during the run, or the two parsers disagree on it); rerun, or use "
                    "--engine local."
                )
            shards[rec.pop("shard")].append(rec)
        for shard, recs in shards.items():
            recs.sort(key=lambda r: (-len(r["text"] or ""), r["row"]))  # the order plan_shards gives the local engine
            for rows in self.worker.iter_process(recs):
                yield pa.table({"shard": pa.array([shard] * len(rows), pa.int64()),
                                "payload": pa.array([json.dumps(r) for r in rows], pa.string())})


def _todo(batch: Any) -> Any:
    """The rows to explain (``shard`` >= 0) of a block of the zipped input."""
    import pyarrow.compute as pc

    return batch.filter(pc.greater_equal(batch.column("shard"), 0))


def _skip_row(row: Any) -> str:
    """pyarrow's CSV reader: skip a row with more or fewer fields than the header (``bad_rows="skip"``)."""
    return "skip"


def ray_reads(path: Any, encoding: str) -> bool:
    """Whether the ray engine reads this input file itself (``ray.data.read_*``), so the driver keeps no text.

    CSV (any encoding pyarrow transcodes) and Parquet: yes; JSON Lines: when
    UTF-8 (pyarrow's JSON reader reads nothing else; other encodings are read
    by the driver, as the local engine does).
    """
    suffix = Path(path).suffix.lower()
    if suffix in PARQUET_SUFFIXES or suffix == ".csv":
        return True
    return suffix in JSONL_SUFFIXES and encoding.lower().replace("_", "-") in ("utf-8", "utf8")


def _read_texts(ray: Any, read: Dict[str, Any]) -> Any:
    """The input's text column as a Ray Dataset named ``text``, one row per input row, in input order."""
    import pyarrow as pa

    path, column = read["path"], read["text_column"]
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        import pyarrow.csv as pacsv

        parse = dict(newlines_in_values=True)
        if read["bad_rows"] == "skip":
            parse["invalid_row_handler"] = _skip_row
        texts = ray.data.read_csv(
            path, file_extensions=None, num_cpus=0,
            read_options=pacsv.ReadOptions(encoding=read["encoding"]),
            parse_options=pacsv.ParseOptions(**parse),
            convert_options=pacsv.ConvertOptions(column_types={column: pa.string()}, include_columns=[column],
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    elif suffix in PARQUET_SUFFIXES:
        texts = ray.data.read_parquet(path, columns=[column], file_extensions=None, num_cpus=0)
    else:
        import pyarrow.json as pajson

        schema = pa.schema([pa.field(column, pa.string())])
        texts = ray.data.read_json(path, file_extensions=None, num_cpus=0, parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))
    # the reading ops take no CPU: the actors may hold every CPU of the cluster, and must not starve their input
    if column != "text":
        texts = texts.rename_columns({column: "text"}, num_cpus=0)
    return texts.select_columns(["text"], num_cpus=0).limit(read["n_rows"])


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
    read: Optional[Dict[str, Any]] = None,
) -> None:
    """Explain ``shards`` on Ray Data; call ``on_rows(shard index, rows)`` with the rows of each batch.

    With ``read`` (``{"path", "text_column", "encoding", "bad_rows", "n_rows"}``),
    the records hold no text: Ray reads the texts from the file itself and
    each actor checks every text against the driver's hash of it.

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
        arrived: set = set()

        def deliver(shard: int, rows: List[Dict[str, Any]]) -> None:
            arrived.update(r["row"] for r in rows)
            on_rows(shard, rows)

        for attempt in range(ACTOR_RESTARTS + 1):
            todo = [[r for r in shard if r["row"] not in arrived] for shard in shards]
            if not any(todo):
                return
            # Ray Data logs every execution, and a lost worker with its traceback, on the terminal; the driver
            # reports both itself in one line (its full logs stay in Ray's session folder)
            data_logger = logging.getLogger("ray.data")
            level = data_logger.level
            data_logger.setLevel(logging.CRITICAL)
            try:
                _execute(ray, todo, worker_kwargs, deliver, actors, cpus_per_actor, gpus_per_actor, read)
                return
            except PRXAIError:
                raise
            except Exception as err:
                cause = _cause(err)
                if cause is not None:
                    raise PRXAIError(str(cause)) from None
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                lost = _lost_worker(err)
                if lost is not None and attempt < ACTOR_RESTARTS:
                    left = sum(len(t) for t in todo) - sum(1 for t in todo for r in t if r["row"] in arrived)
                    print(f"attribute-dataset: a Ray worker was lost ({lost}); explaining the {left} text(s) left "
                          f"on new actors (retry {attempt + 1} of {ACTOR_RESTARTS}).", file=sys.stderr)
                    continue
                where = f" in {output}" if output else ""
                after = f" after {ACTOR_RESTARTS} retries" if lost is not None else ""
                raise PRXAIError(f"the ray engine failed{after} ({type(err).__name__}: {first}); the finished shards "
                                 f"are kept{where}: rerun the same command to resume.") from err
            finally:
                data_logger.setLevel(level)
    finally:
        if started:
            ray.shutdown()


#: Ray's exceptions that mean a worker process or node was lost (not an error of our code)
_LOST = ("ActorDiedError", "ActorUnavailableError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError",
         "OwnerDiedError", "OutOfMemoryError", "RayActorError", "LocalRayletDiedError")


def _lost_worker(err: BaseException) -> Optional[str]:
    """The name of the Ray exception in ``err``'s chain that says a worker was lost, if any."""
    seen = set()
    stack = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        for cls in type(e).__mro__:
            if cls.__name__ in _LOST:
                return cls.__name__
        stack += [e.__cause__, e.__context__, getattr(e, "cause", None)]
    text = str(err)
    return next((name for name in _LOST if name in text), None)


def _execute(ray: Any, shards: Sequence[Sequence[Dict[str, Any]]], worker_kwargs: Dict[str, Any],
             deliver: Callable[[int, List[Dict[str, Any]]], None], actors: int, cpus_per_actor: int,
             gpus_per_actor: float, read: Optional[Dict[str, Any]]) -> None:
    """One pass of Ray Data over ``shards`` (a shard may be empty; its index is kept)."""
    import pyarrow as pa

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # ours counts docs/s
    shard_of = {r["row"]: index for index, shard in enumerate(shards) for r in shard}
    if read is None:  # the texts are in the driver (a packaged dataset): one block a shard
        tables = []
        for index, shard in enumerate(shards):
            if not shard:
                continue
            tables.append(pa.table({
                "shard": pa.array([index] * len(shard), pa.int64()),
                "row": pa.array([r["row"] for r in shard], pa.int64()),
                "id": pa.array([r["id"] for r in shard], pa.string()),
                "text": pa.array([r["text"] for r in shard], pa.string()),
                "label": pa.array([r["label"] for r in shard], pa.int64()),
                "input_hash": pa.array([r["input_hash"] for r in shard], pa.string()),
            }))
        source = ray.data.from_arrow(tables)
    else:
        # the texts are read by Ray (ray.data.read_csv / read_parquet / read_json), zipped row by row with the
        # driver's plan (row, shard, id, label, hashes: no text); the rows not to explain now are dropped
        context.execution_options.preserve_order = True  # zip pairs rows by position
        by_row = {r["row"]: r for shard in shards for r in shard}
        n = read["n_rows"]

        def column(key: str) -> List[Any]:
            return [by_row[i][key] if i in by_row else None for i in range(n)]

        plan = pa.table({
            "row": pa.array(range(n), pa.int64()),
            "shard": pa.array([shard_of.get(i, -1) for i in range(n)], pa.int64()),
            "id": pa.array(column("id"), pa.string()),
            "label": pa.array(column("label"), pa.int64()),
            "input_hash": pa.array(column("input_hash"), pa.string()),
            "digest": pa.array(column("digest"), pa.string()),
        })
        with warnings.catch_warnings():  # zip's deprecation: preserve_order makes its order deterministic
            warnings.simplefilter("ignore")
            source = (_read_texts(ray, read).zip(ray.data.from_arrow(plan))
                      .map_batches(_todo, batch_format="pyarrow", batch_size=None, num_cpus=0))
        # run the reading first, into Ray's object store (which spills to disk; never into the driver): in one
        # pipeline with the actor pool, Ray Data's scheduler stalls on a cluster the actors fill
        # about one block a shard (contiguous, in order), so the actors share the work
        source = source.repartition(max(sum(1 for shard in shards if shard), 1)).materialize()
    # the worker's arguments are class attributes (pickled with the class), and Ray does not restart actors
    # (max_restarts=0; the driver retries the rows left, at most ACTOR_RESTARTS times): Ray logs an error-level
    # line for every actor with max_restarts > 0, as Ray Data keeps its constructor's arguments in the object store
    bound = type("_BoundRayWorker", (_RayWorker,), {"worker_kwargs": dict(worker_kwargs), "threads": cpus_per_actor})
    with warnings.catch_warnings():  # max_restarts goes through ray_remote_args (deprecated; no named parameter yet)
        warnings.simplefilter("ignore")
        dataset = source.map_batches(
            bound,
            batch_size=None,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
            max_restarts=0,
        )
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
        grouped: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
        for shard, payload in zip(batch.column("shard").to_pylist(), batch.column("payload").to_pylist()):
            grouped[shard].append(json.loads(payload))
        for shard, rows in grouped.items():
            deliver(shard, rows)
