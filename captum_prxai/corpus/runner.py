"""``attribute_dataset``: explain every text of a corpus into a table of token scores.

The driver reads and checks the input (:mod:`captum_prxai.corpus.io`), loads
the model once to check the methods, labels and target, plans the shards,
skips the ones already in the output folder, and hands the rest to an engine:

* ``local``: one :class:`~captum_prxai.corpus.worker.Worker` in this process;
* ``ray``: Ray Data, with an actor pool of workers
  (:mod:`captum_prxai.corpus.ray_engine`).

Both engines run the same worker code, so their output is the same, row
for row. The driver writes each finished shard atomically (listed in the
manifest, temporary file, then rename), and the rows of an unfinished one
every ``flush_seconds``, so an interrupted run leaves only complete shard
files and loses little work. A rerun with the same settings keeps a finished
shard only if every row in it still matches the input (id, row number and
input hash: settings, text, label), explains the rest, and says what changed.

Throughput: shards are cut from the input sorted by character length
(longest first, so memory trouble shows early), and each shard is cut into
batches of similar token length with at most ``token_budget`` padded
tokens (:func:`~captum_prxai.corpus.worker.plan_batches`); padding is per
batch (dynamic).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from captum_prxai.corpus.io import SHARD_NAME, Corpus, ShardStore, input_hash, map_labels, read_corpus, score_column
from captum_prxai.corpus.worker import LONG_POLICIES, Worker, method_registry
from captum_prxai.exceptions import PRXAIError

__all__ = ["ENGINES", "DatasetRun", "attribute_dataset", "plan_shards"]

ENGINES = ("local", "ray")
#: version of the output layout; part of the run key (2: rows carry input_hash, the manifest lists its shards)
OUTPUT_VERSION = 2


@dataclass
class DatasetRun:
    """What :func:`attribute_dataset` did.

    Attributes:
        output: The output folder.
        engine: ``"local"`` or ``"ray"``.
        total: Texts in the input.
        already_done: Texts found in finished shards (not redone).
        processed: Texts handled by this run (explained + skipped).
        explained: Texts explained by this run.
        skipped: Reason -> count of this run's skipped texts (``empty``,
            ``too-long``, ``no-label``).
        truncated: This run's texts cut to the limit; ``windowed``: explained with windows.
        shards: Shard files written by this run.
        recomputed_shards: Finished shards deleted because the input changed
            where they were (their texts are explained again; see ``notes``).
        damaged_shards: Damaged shard files found, deleted and recomputed.
        seconds: Wall time of the explaining (model loading excluded).
        notes: Anything else the caller should know (e.g. labels not carried).
    """

    output: Path
    engine: str
    total: int
    already_done: int
    processed: int = 0
    explained: int = 0
    skipped: Dict[str, int] = field(default_factory=dict)
    truncated: int = 0
    windowed: int = 0
    shards: int = 0
    recomputed_shards: int = 0
    damaged_shards: int = 0
    seconds: float = 0.0
    notes: List[str] = field(default_factory=list)

    @property
    def docs_per_second(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> str:
        """A few lines for the terminal."""
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
        lines = [
            f"{self.processed} texts in {self.seconds:.1f} s ({self.docs_per_second:.1f} docs/s, engine {self.engine}); "
            f"{self.already_done} of {self.total} were already done",
            f"explained {self.explained} (truncated {self.truncated}, windowed {self.windowed}); skipped: {skipped}",
            f"wrote {self.shards} shard(s) to {self.output}",
        ]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def plan_shards(records: Sequence[Dict[str, Any]], shard_size: int, bucketing: bool = True) -> List[List[Dict[str, Any]]]:
    """Cut records into shards of ``shard_size``.

    With ``bucketing``, records are first sorted by character length, longest
    first (ties by row), so every shard holds texts of similar length; the
    worker then sorts each shard by token length. Without it, shards follow
    the input order.
    """
    if shard_size < 1:
        raise PRXAIError(f"shard_size must be at least 1, got {shard_size}.")
    items = list(records)
    if bucketing:
        items.sort(key=lambda r: (-r.get("length", len(r.get("text") or "")), r["row"]))
    return [items[i:i + shard_size] for i in range(0, len(items), shard_size)]


def _model_identity(model: Any) -> Dict[str, Any]:
    """Name, class and a weight checksum (so a rerun with other weights never mixes rows)."""
    import torch

    config = getattr(model, "config", None)
    with torch.no_grad():
        total = sum(float(p.detach().double().sum()) for p in model.parameters())
        n_params = sum(p.numel() for p in model.parameters())
    return {"class": type(model).__name__, "name_or_path": str(getattr(config, "_name_or_path", "") or ""),
            "parameters": int(n_params), "checksum": f"{total:.10e}"}


def attribute_dataset(
    input: Optional[Union[str, os.PathLike]] = None,
    output: Union[str, os.PathLike] = "attributions",
    *,
    dataset: Optional[str] = None,
    split: str = "test",
    text_column: str = "text",
    id_column: Optional[str] = None,
    label_column: Optional[str] = None,
    encoding: str = "utf-8",
    limit: Optional[int] = None,
    bad_rows: str = "error",
    model: Union[str, Tuple[Any, Any]] = "default",
    methods: Optional[Union[str, Sequence[str]]] = None,
    method_options: Optional[Dict[str, Dict[str, Any]]] = None,
    target: Union[str, int] = "predicted",
    long: str = "truncate",
    max_length: Optional[int] = None,
    window_stride: Optional[int] = None,
    token_budget: int = 8192,
    bucketing: bool = True,
    shard_size: int = 256,
    format: str = "parquet",
    overwrite: bool = False,
    engine: str = "local",
    device: str = "auto",
    threads: Optional[int] = None,
    actors: int = 1,
    cpus_per_actor: int = 1,
    gpus_per_actor: Optional[float] = None,
    address: Optional[str] = None,
    progress: bool = True,
    on_shard: Optional[Callable[[Path], None]] = None,
    flush_seconds: float = 30.0,
) -> DatasetRun:
    """Explain every text of a corpus with one or more attribution methods; write a table of token scores.

    Output (a folder of shards, read with ``pandas.read_parquet(output)`` or
    :func:`captum_prxai.corpus.read_results`): one row per input text with
    ``row`` (position in the input), ``id``, ``label`` (gold class index or
    null), ``skip_reason`` (null, or why the text was not explained),
    ``n_tokens`` (before truncation), ``truncated``, ``windows`` (windows used,
    0 if none), ``tokens``, ``predicted``, ``probabilities``, ``target`` (the
    explained class) and one ``scores_<method>`` list per method (one score
    per token). The model and all settings are in each Parquet file's schema
    metadata (key ``captum_prxai``) and in ``_run.json``.

    Args:
        input: A ``.csv``, ``.jsonl`` or ``.parquet`` file (or use ``dataset``).
        output: Output folder.
        dataset, split: A packaged dataset instead of a file.
        text_column, id_column, label_column: Column names (id and label optional).
        encoding: Encoding of CSV and JSON Lines input.
        limit: Explain only the first ``limit`` texts (0 or more).
        bad_rows: A CSV row with more or fewer fields than the header:
            ``"error"`` (refused with its line number) or ``"skip"`` (skipped,
            counted in the summary).
        model: ``"default"``, a checkpoint folder, a trained model's name, or a
            ``(model, tokenizer)`` pair.
        methods: Registry names, comma-separated or a list (e.g. ``"pr-g,pr-a"``); default: the
            model's default method (:func:`captum_prxai.methods.default_method`, ``"pr-xai"``:
            :class:`~captum_prxai.PageRankAttribution` with its defaults, resolved per model).
        method_options: Per-method overrides, e.g. ``{"pr-g": {"damping": 0.5}}``; only for methods that
            are run (an option for another method is refused).
        target: ``"predicted"``, ``"label"`` or a class index.
        long: ``"truncate"``, ``"windows"`` or ``"skip"`` for texts over the limit.
        max_length: Token limit (default: the model's).
        window_stride: Content tokens between window starts (``long="windows"``).
        token_budget: Padded tokens per batch.
        bucketing: Sort by length into shards and batches (off: input order).
        shard_size: Texts per shard (the unit of resumption and of Ray's work).
        format: ``"parquet"`` or ``"jsonl"``.
        overwrite: Delete results of other settings in ``output`` instead of stopping.
        engine: ``"local"`` or ``"ray"``.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` (local engine; Ray actors use
            a GPU when they are given one).
        threads: Torch threads of the local engine (default: torch's).
        actors: Ray actors (each loads the model once).
        cpus_per_actor: CPUs reserved per actor, also its torch threads.
        gpus_per_actor: GPUs per actor (default: 1 when the cluster has GPUs, else 0).
        address: Ray cluster to join (default: ``RAY_ADDRESS``, else a new local one).
        progress: Show a progress bar (docs/s).
        on_shard: Called with each shard file written.
        flush_seconds: Write a shard's rows computed so far (a partial
            shard) once this many seconds have passed since its work began or
            its last write, so an interrupted run loses at most about this
            much work; 0 writes after every batch.

    Returns:
        A :class:`DatasetRun` with the counts (skips by reason) and timing.

    Raises:
        PRXAIError: Bad input (missing column, empty file, bad bytes, duplicate
            ids, unknown labels), unknown method, unwritable output, output of
            other settings, or a failed Ray worker (finished shards are kept).
    """
    if engine not in ENGINES:
        raise PRXAIError(f"unknown engine {engine!r}; choose from: {', '.join(ENGINES)}.")
    if not str(output).strip():
        raise PRXAIError("the output folder is an empty name (''); give a folder, e.g. --output scores/ "
                         "(the results are written as shards in it).")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise PRXAIError(f"threads must be a whole number, at least 1, got {threads!r}; leave it out for torch's "
                         "default.")
    if long not in LONG_POLICIES:
        raise PRXAIError(f"unknown long-text policy {long!r}; choose from: {', '.join(LONG_POLICIES)}.")
    if not isinstance(flush_seconds, (int, float)) or isinstance(flush_seconds, bool) or not flush_seconds >= 0:
        raise PRXAIError(f"flush_seconds must be 0 or more, got {flush_seconds!r}.")
    if token_budget < 1 or shard_size < 1 or actors < 1 or cpus_per_actor < 1:
        raise PRXAIError("token_budget, shard_size, actors and cpus_per_actor must be positive.")
    registry = method_registry()
    names = None if methods is None else registry.parse_methods(methods)  # None: the model's default, below
    # format, pyarrow, permissions: early (the columns do not matter for this check)
    ShardStore(output, format, names or [registry.default_method()], {"run_key": ""}).check_writable()
    ray_reads_input = False
    if engine == "ray" and input is not None:
        from captum_prxai.corpus.ray_engine import ray_reads

        ray_reads_input = ray_reads(input, encoding)
    # the file is read row by row; with the ray engine reading the texts itself, the driver keeps only their hashes
    corpus = read_corpus(input, dataset=dataset, split=split, text_column=text_column, id_column=id_column,
                         label_column=label_column, encoding=encoding, limit=limit, bad_rows=bad_rows,
                         keep_texts=not ray_reads_input)
    if target == "label" and corpus.labels is None:
        raise PRXAIError("target 'label' explains each text's gold label: give the label column (--label-column).")
    if engine == "ray":
        from captum_prxai.corpus.ray_engine import check_ray

        check_ray()

    worker_kwargs = dict(model=model, methods=names, method_options=method_options or {}, target=target,
                         long=long, max_length=max_length, window_stride=window_stride,
                         token_budget=token_budget, bucketing=bucketing)
    worker = Worker(**worker_kwargs, device=device, threads=threads)
    names = worker_kwargs["methods"] = list(worker.methods)  # resolved for the model (Ray actors get the same)
    notes: List[str] = []
    if corpus.skipped_lines:
        shown = ", ".join(map(str, corpus.skipped_lines[:10])) + (", ..." if len(corpus.skipped_lines) > 10 else "")
        notes.append(f"skipped {len(corpus.skipped_lines)} ragged CSV row(s) of {corpus.source} "
                     f"(more or fewer fields than the header): line(s) {shown}.")
    labels = _labels(corpus, worker.label_names, target, notes)

    metadata = {
        "format_version": OUTPUT_VERSION,
        "format": format,
        "model": model if isinstance(model, str) else "(model object)",
        "model_identity": _model_identity(worker.model),
        "label_names": worker.label_names,
        "methods": [{"name": e.name, "label": e.label, "column": score_column(e.name)} for e in worker.explainers],
        "method_options": worker.method_options,
        "target": target,
        "long": long,
        "max_length": worker.max_length,
        "window_stride": worker.window_stride if long == "windows" else None,
        "source": corpus.source,
        "columns": {"text": text_column, "id": id_column, "label": label_column},
    }
    key_blob = json.dumps({k: v for k, v in metadata.items() if k not in ("source", "columns")},
                          sort_keys=True, default=str)
    metadata["run_key"] = hashlib.sha1(key_blob.encode()).hexdigest()[:16]
    store = ShardStore(output, format, names, metadata)
    store.prepare(overwrite=overwrite)

    hashes = [input_hash(metadata["run_key"], corpus.ids[i], corpus.digests[i], labels[i]) for i in range(len(corpus))]
    held, damaged = store.finished()
    for line in damaged:
        notes.append(f"{line}: deleted, its texts are explained again.")
    done, stale, changed = _reconcile(held, corpus.ids, hashes)
    if stale:
        store.remove(stale)
        notes.append(_changed_note(changed, len(stale), id_column is None and dataset is None))
    strays = [p.name for p in store.folder.iterdir() if SHARD_NAME.match(p.name) and p.name not in store.listed]
    if strays:
        notes.append(f"{len(strays)} shard file(s) in {store.folder} are not this run's (not listed in its manifest: "
                     f"{strays[0]}, ...); they are left alone, but readers of the folder will read them too.")
    texts = corpus.texts  # None: the Ray engine reads them itself (ray.data.read_*), the driver never holds them
    records = [{"row": i, "id": corpus.ids[i], "text": None if texts is None else texts[i], "label": labels[i],
                "input_hash": hashes[i], "length": corpus.lengths[i], "digest": corpus.digests[i]}
               for i in range(len(corpus)) if corpus.ids[i] not in done]
    result = DatasetRun(store.folder, engine, len(corpus), len(corpus) - len(records), notes=notes,
                        recomputed_shards=len(stale), damaged_shards=len(damaged))
    # Ray reading the file streams it in input order: its shards are cut in that order (each is still sorted by
    # length into batches); otherwise the shards are cut from the texts sorted by length
    shards = plan_shards(records, shard_size, bucketing and texts is not None)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(records), unit="doc", desc="attribute-dataset", disable=not progress or not records,
               dynamic_ncols=True)

    def finish(rows: List[Dict[str, Any]]) -> None:
        path = store.write(rows)
        result.shards += 1
        result.processed += len(rows)
        for r in rows:
            if r["skip_reason"] is not None:
                result.skipped[r["skip_reason"]] = result.skipped.get(r["skip_reason"], 0) + 1
            else:
                result.explained += 1
                result.truncated += bool(r["truncated"])
                result.windowed += bool(r["windows"])
        bar.update(len(rows))  # counted once its file exists
        if on_shard is not None:
            on_shard(path)

    flusher = _Flusher(shards, flush_seconds, finish, bar)
    start = time.perf_counter()
    try:
        if engine == "local":
            for index, shard in enumerate(shards):
                flusher.start(index)
                for rows in worker.iter_process(shard):
                    flusher.add(index, rows)
        else:
            del worker  # the actors load their own copies
            from captum_prxai.corpus.ray_engine import run_ray

            read = None
            if corpus.texts is None:
                read = {"path": str(Path(input).resolve()), "text_column": text_column, "encoding": encoding,
                        "bad_rows": bad_rows, "n_rows": len(corpus)}
            run_ray(shards, worker_kwargs, flusher.add, actors=actors, cpus_per_actor=cpus_per_actor,
                    gpus_per_actor=gpus_per_actor, address=address, output=store.folder, read=read)
        flusher.check_complete()
    except BaseException:
        try:
            flusher.flush_all()  # keep what was computed (Ctrl-C, a failed batch): the rerun resumes after it
        except PRXAIError:
            pass
        raise
    finally:
        result.seconds = time.perf_counter() - start
        bar.close()
    return result


class _Flusher:
    """Collects each shard's rows as they are computed and writes them.

    A shard is written when all its rows are in, or, as a partial shard of
    the rows so far, once ``flush_seconds`` have passed since its work began
    or since its last write, so an interrupted run loses at most that much
    work. Rows a shard already has (a Ray task retried after its actor died
    sends them again) are dropped, so no row is ever written twice.
    """

    def __init__(self, shards: Sequence[Sequence[Dict[str, Any]]], flush_seconds: float,
                 write: Callable[[List[Dict[str, Any]]], None], bar: Any) -> None:
        self.remaining = {i: {r["row"] for r in shard} for i, shard in enumerate(shards)}
        self.pending: Dict[int, List[Dict[str, Any]]] = {}
        self.since: Dict[int, float] = {}
        self.flush_seconds = flush_seconds
        self.write = write
        self.bar = bar

    def start(self, index: int) -> None:
        self.since[index] = time.monotonic()

    def add(self, index: int, rows: List[Dict[str, Any]]) -> None:
        left = self.remaining[index]
        fresh = [r for r in rows if r["row"] in left]
        if not fresh:
            return
        left.difference_update(r["row"] for r in fresh)
        self.since.setdefault(index, time.monotonic())
        self.pending.setdefault(index, []).extend(fresh)
        if not left:
            self._write(index)
        now = time.monotonic()
        for i in [i for i in self.pending if now - self.since[i] >= self.flush_seconds]:
            self._write(i)
        self.bar.set_postfix(computed=sum(map(len, self.pending.values())), refresh=False)

    def _write(self, index: int) -> None:
        rows = self.pending.pop(index, [])
        self.since[index] = time.monotonic()
        if rows:
            self.write(rows)

    def flush_all(self) -> None:
        for index in list(self.pending):
            self._write(index)

    def check_complete(self) -> None:
        self.flush_all()
        missing = sorted(r for left in self.remaining.values() for r in left)
        if missing:
            raise PRXAIError(f"{len(missing)} text(s) came back without results (rows {missing[:5]}...); rerun the "
                             "same command to resume.")


def _reconcile(held: Dict[str, List[Tuple[int, str, Optional[str]]]], ids: Sequence[str],
               hashes: Sequence[str]) -> Tuple[set, List[str], Dict[str, List[str]]]:
    """Which finished rows still match the input.

    A shard is kept only if every row in it still has its id, row number and
    input hash in the input, and no kept shard holds it already; else the
    whole shard is stale (deleted, its texts explained again).

    Returns:
        ``(ids done, stale shard names, {"changed" | "removed" | "moved" | "repeated": ids})``.
    """
    current = {id_: (i, h) for i, (id_, h) in enumerate(zip(ids, hashes))}
    done: set = set()
    stale: List[str] = []
    changed: Dict[str, List[str]] = {"changed": [], "removed": [], "moved": [], "repeated": []}
    for name, entries in sorted(held.items()):
        ok = True
        for row, id_, digest in entries:
            now = current.get(id_)
            kind = ("removed" if now is None else "changed" if now[1] != digest else "moved" if now[0] != row
                    else "repeated" if id_ in done else None)
            if kind is not None:
                changed[kind].append(id_)
                ok = False
        if ok:
            done.update(id_ for _, id_, _ in entries)
        else:
            stale.append(name)
    return done, stale, changed


def _changed_note(changed: Dict[str, List[str]], n_stale: int, row_ids: bool) -> str:
    said = {"changed": "with another text or label", "removed": "no longer in the input",
            "moved": "at another row", "repeated": "in two shards"}
    parts = []
    for kind, ids in changed.items():
        if ids:
            shown = ", ".join(repr(i) for i in ids[:3]) + (", ..." if len(ids) > 3 else "")
            parts.append(f"{len(ids)} {said[kind]} (id {shown})")
    hint = (" Ids are row numbers here, so an inserted or deleted row shifts every row after it; an id column "
            "(--id-column) keeps the unchanged rows.") if row_ids else ""
    return (f"the input changed since these results were written: {'; '.join(parts)}. The {n_stale} shard(s) "
            f"holding them were deleted and their texts still in the input are explained again.{hint}")


def _labels(corpus: Corpus, label_names: List[str], target: Union[str, int], notes: List[str]) -> List[Optional[int]]:
    if corpus.labels is None:
        return [None] * len(corpus)
    if corpus.label_names is not None:  # a packaged dataset: keep its labels if its classes are the model's
        ours = [n.lower() for n in corpus.label_names]
        if sorted(ours) != sorted(n.lower() for n in label_names):
            if target == "label":
                raise PRXAIError(f"{corpus.source} has classes {', '.join(corpus.label_names)} but the model's are "
                                 f"{', '.join(label_names)}; target 'label' cannot be explained.")
            notes.append(f"{corpus.source}'s labels ({', '.join(corpus.label_names)}) are not the model's classes "
                         f"({', '.join(label_names)}); the label column is left empty.")
            return [None] * len(corpus)
    return map_labels(corpus.labels, label_names, corpus.source, corpus.label_names)
