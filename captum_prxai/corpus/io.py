"""Reading corpora (packaged datasets, CSV, JSON Lines, Parquet) and writing result shards.

Both engines of :func:`captum_prxai.corpus.attribute_dataset` read their input
here, once, in the driver: one parser means the same rows, the same ids and
the same bad-input errors whichever engine runs, and every error is raised
before any model is loaded or any worker starts. CSV and JSON Lines are read
with the standard library; Parquet (input or output) needs ``pyarrow``
(``pip install 'captum-prxai[dataset]'``).

Results are written as shards, ``part-<first row>-<digest of its ids>.parquet``
(or ``.jsonl``) in the output folder, each listed in the manifest, then
written to a hidden temporary file and renamed into place, so a shard file is
either complete or absent: the output never holds a partial row. A shard
that is damaged all the same (a truncated file, rows that do not match its
name) is detected when read. Each row carries ``input_hash``, a hash of the
run's settings and of the row's id, text and label, so a resumed run reuses
a row only if its input is unchanged.
Readers (pandas, pyarrow, Ray, Spark) skip the hidden temporary files and
the ``_run.json`` manifest, so ``pandas.read_parquet(folder)`` reads the table.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from captum_prxai.exceptions import PRXAIError

__all__ = [
    "Corpus",
    "FORMATS",
    "MANIFEST",
    "read_corpus",
    "read_results",
    "score_column",
    "ShardStore",
]

#: output formats
FORMATS = ("parquet", "jsonl")
#: the run's settings, written in the output folder (ignored by Parquet readers: leading underscore)
MANIFEST = "_run.json"
#: input suffixes read as JSON Lines and as Parquet
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
#: what to do with a CSV row whose field count is not the header's
BAD_ROWS = ("error", "skip")
#: key of the run's settings in each Parquet shard's schema metadata
METADATA_KEY = b"captum_prxai"


@dataclass
class Corpus:
    """Texts to explain, in input order.

    Attributes:
        source: What was read (a path, or ``dataset:<name>/<split>``).
        ids: One unique string id per text (the id column, else the row number).
        texts: The texts (``None`` where the input had no value).
        labels: Raw label values (``None`` without a label column).
        label_names: Class names known from the source (packaged datasets).
        skipped_lines: Lines of the ragged CSV rows skipped (``bad_rows="skip"``).
        digests: :func:`text_digest` of each text.
        lengths: Characters of each text.
    """

    source: str
    ids: List[str]
    texts: Optional[List[Optional[str]]]
    labels: Optional[List[Any]] = None
    label_names: Optional[List[str]] = field(default=None)
    skipped_lines: List[int] = field(default_factory=list)
    digests: List[str] = field(default_factory=list)
    lengths: List[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def _require_pyarrow(why: str) -> Any:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise PRXAIError(f"{why} needs pyarrow: pip install 'captum-prxai[dataset]' (or pip install pyarrow).") from None
    return pyarrow


def _decode_error(path: Path, err: UnicodeDecodeError, encoding: str) -> PRXAIError:
    raw = path.read_bytes()[: err.start]
    line = raw.count(b"\n") + 1
    return PRXAIError(
        f"{path} is not valid {encoding}: byte 0x{err.object[err.start]:02x} at offset {err.start} (line {line}); "
        "re-encode the file (e.g. iconv -f latin1 -t utf-8) or pass its encoding with --encoding."
    )


def _read_text(path: Path, encoding: str) -> str:
    try:
        return path.read_bytes().decode(encoding)
    except UnicodeDecodeError as err:
        raise _decode_error(path, err, encoding) from None
    except LookupError:
        raise PRXAIError(f"unknown encoding {encoding!r}; use e.g. utf-8 or latin-1.") from None


def _open_text(path: Path, encoding: str) -> Any:
    try:
        return open(path, encoding=encoding, newline="")
    except LookupError:
        raise PRXAIError(f"unknown encoding {encoding!r}; use e.g. utf-8 or latin-1.") from None


@dataclass
class _Source:
    """An input file, read row by row: ``columns`` (known once ``rows`` is exhausted for JSON Lines),
    ``rows`` yields ``(where, row dict)``, ``skipped`` the lines of the ragged CSV rows skipped."""

    columns: List[str]
    rows: Iterator[Tuple[str, Dict[str, Any]]]
    skipped: List[int] = field(default_factory=list)


def _csv_rows(path: Path, encoding: str, bad_rows: str) -> _Source:
    """A CSV file, row by row, with the line each row starts on."""
    fh = _open_text(path, encoding)
    reader = csv.reader(fh)  # newline="": physical lines are \r\n or \n (not U+2028 or a form feed)
    old_limit = csv.field_size_limit()
    # the csv module refuses fields over 131,072 characters by default; the same text reads fine as JSON Lines
    csv.field_size_limit(2**31 - 1)
    try:
        header = next(reader, None)
    except UnicodeDecodeError:
        _read_text(path, encoding)  # raises the error with its offset and line
        raise
    finally:
        csv.field_size_limit(old_limit)
    if not header:
        fh.close()
        raise PRXAIError(f"{path} is empty: a CSV file needs a header line naming its columns and one row per text.")
    if header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    source = _Source(header, iter(()))

    def rows() -> Iterator[Tuple[str, Dict[str, Any]]]:
        end = reader.line_num
        old = csv.field_size_limit()
        try:
            while True:
                csv.field_size_limit(2**31 - 1)  # process-wide: restored between rows (the caller may read CSV too)
                try:
                    r = next(reader, None)
                except UnicodeDecodeError:
                    _read_text(path, encoding)
                    raise
                except csv.Error as err:
                    raise PRXAIError(f"{path}:{reader.line_num}: not valid CSV ({err}).") from None
                finally:
                    csv.field_size_limit(old)
                if r is None:
                    return
                start, end = end + 1, reader.line_num
                if not r:
                    continue
                if len(r) != len(header):
                    if bad_rows == "skip":
                        source.skipped.append(start)
                        continue
                    raise PRXAIError(
                        f"{path}:{start}: this row has {len(r)} fields but the header has {len(header)} "
                        f"({', '.join(header)}); quote fields that hold commas (\"...\"), or pass --skip-bad-rows "
                        "to skip such rows (they are counted)."
                    )
                yield f"line {start}", dict(zip(header, r))
        finally:
            fh.close()

    source.rows = rows()
    return source


def _jsonl_rows(path: Path, encoding: str) -> _Source:
    """A JSON Lines file, object by object; its columns are the keys seen, known once read."""
    source = _Source([], iter(()))

    def rows() -> Iterator[Tuple[str, Dict[str, Any]]]:
        columns: Dict[str, None] = {}
        with _open_text(path, encoding) as fh:
            line_no = 0
            while True:
                try:
                    # newline="" splits at \n and \r only: JSON strings may hold U+2028 or a form feed
                    line = fh.readline()
                except UnicodeDecodeError:
                    _read_text(path, encoding)
                    raise
                if not line:
                    break
                line_no += 1
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as err:
                    raise PRXAIError(f"{path}:{line_no}: not valid JSON ({err.msg}); a JSON Lines file holds one "
                                     "object a line.") from None
                if not isinstance(rec, dict):
                    raise PRXAIError(f"{path}:{line_no}: expected a JSON object, got {type(rec).__name__}.")
                for key in rec:
                    if key not in columns:
                        columns[key] = None
                        source.columns.append(key)
                yield f"line {line_no}", rec

    source.rows = rows()
    return source


def _parquet_rows(path: Path, wanted: Sequence[str]) -> _Source:
    """A Parquet file, record batch by record batch (only the ``wanted`` columns)."""
    _require_pyarrow("reading Parquet input")
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(str(path))
    except Exception as err:  # pyarrow raises ArrowInvalid, OSError, ...
        raise PRXAIError(f"{path}: cannot read it as Parquet ({err}).") from None
    columns = list(handle.schema_arrow.names)

    def rows() -> Iterator[Tuple[str, Dict[str, Any]]]:
        i = 0
        try:
            for batch in handle.iter_batches(columns=[c for c in columns if c in wanted]):
                for row in batch.to_pylist():
                    yield f"row {i}", row
                    i += 1
        except PRXAIError:
            raise
        except Exception as err:
            raise PRXAIError(f"{path}: cannot read it as Parquet ({err}).") from None

    return _Source(columns, rows())


def text_digest(text: Optional[str]) -> str:
    """A hash of one text (``None`` included): what :func:`input_hash` and the Ray engine's check compare."""
    if text is None:
        return "null"
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _as_id(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def read_corpus(
    path: Optional[str | os.PathLike] = None,
    *,
    dataset: Optional[str] = None,
    split: str = "test",
    text_column: str = "text",
    id_column: Optional[str] = None,
    label_column: Optional[str] = None,
    encoding: str = "utf-8",
    limit: Optional[int] = None,
    bad_rows: str = "error",
    keep_texts: bool = True,
) -> Corpus:
    """Read the texts to explain from a file or a packaged dataset.

    Args:
        path: A ``.csv``, ``.jsonl`` (or ``.json`` with one object a line) or
            ``.parquet`` file.
        dataset: Instead of ``path``, a packaged dataset name
            (:func:`captum_prxai.data.list_datasets`); ids are row numbers and
            labels the dataset's.
        split: Split of ``dataset``.
        text_column: Column holding the texts.
        id_column: Column of unique ids (default: the row number, from 0).
        label_column: Optional column of gold labels (class indices or names).
        encoding: Encoding of CSV and JSON Lines files.
        limit: Read only the first ``limit`` texts (0 or more).
        bad_rows: A CSV row whose field count is not the header's: ``"error"``
            (refused, with its line number) or ``"skip"`` (left out, and its
            line listed in :attr:`Corpus.skipped_lines`).
        keep_texts: Keep the texts (``False``: only their hashes and
            lengths, for an engine that reads the texts itself; the file is
            read row by row either way).

    Returns:
        A :class:`Corpus`.

    Raises:
        PRXAIError: Missing file, unknown format, empty file, missing column,
            bytes that are not valid in ``encoding``, duplicate or missing ids,
            a ragged CSV row, a text that is not a string, a negative ``limit``.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise PRXAIError(f"limit must be a whole number of texts, 0 or more, got {limit!r}.")
    if bad_rows not in BAD_ROWS:
        raise PRXAIError(f"bad_rows must be one of {', '.join(BAD_ROWS)}, got {bad_rows!r}.")
    if (path is None) == (dataset is None):
        raise PRXAIError("give either an input file or a packaged dataset (--dataset NAME), not both or neither.")
    if dataset is not None:
        from captum_prxai.data import load_dataset

        data = load_dataset(dataset, split)
        n = len(data) if limit is None else min(limit, len(data))
        texts = list(data.texts[:n])
        return Corpus(f"dataset:{dataset}/{split}", [str(i) for i in range(n)], texts,
                      list(data.labels[:n]), list(data.label_names),
                      digests=[text_digest(t) for t in texts], lengths=[len(t or "") for t in texts])
    path = Path(path)
    if not path.is_file():
        raise PRXAIError(f"no input file {path}.")
    suffix = path.suffix.lower()
    wanted = [c for c in (text_column, id_column, label_column) if c is not None]
    if suffix == ".csv":
        source = _csv_rows(path, encoding, bad_rows)
    elif suffix in JSONL_SUFFIXES:
        source = _jsonl_rows(path, encoding)
    elif suffix in PARQUET_SUFFIXES:
        source = _parquet_rows(path, wanted)
    else:
        raise PRXAIError(f"{path}: unknown input format {suffix or '(no suffix)'!r}; use .csv, .jsonl or .parquet.")

    def check_columns() -> None:
        for role, name in (("text", text_column), ("id", id_column), ("label", label_column)):
            if name is not None and name not in source.columns:
                flag = {"text": "--text-column", "id": "--id-column", "label": "--label-column"}[role]
                raise PRXAIError(f"{path} has no column {name!r} (the {role} column, {flag}); "
                                 f"its columns are: {', '.join(map(str, source.columns)) or '(none)'}.")

    if suffix not in JSONL_SUFFIXES:
        check_columns()  # known from the header or the schema
    texts: Optional[List[Optional[str]]] = [] if keep_texts else None
    digests: List[str] = []
    lengths: List[int] = []
    ids: List[str] = []
    labels: Optional[List[Any]] = None if label_column is None else []
    seen: Dict[str, int] = {}
    i = -1
    for i, (where, row) in enumerate(source.rows):
        if limit is not None and i >= limit:
            i -= 1
            source.rows.close()
            break
        value = row.get(text_column)
        if value is not None and not isinstance(value, str):
            raise PRXAIError(f"{path}, {where}: the text column {text_column!r} holds {_kind(value)}, not a string; "
                             "every text must be a string (or null, which is skipped as empty).")
        if texts is not None:
            texts.append(value)
        digests.append(text_digest(value))
        lengths.append(len(value or ""))
        if id_column is None:
            ids.append(str(i))
        else:
            raw = row.get(id_column)
            if raw is None or str(raw) == "":
                raise PRXAIError(f"{path}: row {i} ({where}) has no id in column {id_column!r}; every text needs a "
                                 "unique id.")
            key = _as_id(raw)
            if key in seen:
                raise PRXAIError(f"{path}: id {key!r} appears twice (rows {seen[key]} and {i}); ids must be unique, "
                                 "since they identify finished rows when a run resumes.")
            seen[key] = i
            ids.append(key)
        if labels is not None:
            labels.append(row.get(label_column))
    n_rows = i + 1
    if n_rows == 0 and limit != 0:
        more = f" ({len(source.skipped)} ragged rows skipped)" if source.skipped else ""
        raise PRXAIError(f"{path} holds no rows{more}; nothing to explain.")
    check_columns()
    return Corpus(str(path), ids, texts, labels, skipped_lines=source.skipped, digests=digests, lengths=lengths)


def _kind(value: Any) -> str:
    """``[1, 2]`` -> ``"a list"``: how an error names a value of the wrong type."""
    name = {list: "a list", dict: "an object", bool: "a boolean", int: "a number", float: "a number",
            bytes: "bytes"}.get(type(value))
    return name or f"a {type(value).__name__}"


def map_labels(labels: Sequence[Any], label_names: Sequence[str], source: str,
               source_names: Optional[Sequence[str]] = None) -> List[Optional[int]]:
    """Raw label values -> class indices of the model (``None`` where empty).

    A value is accepted as a class name of the model (case-insensitive) or as
    an integer index in range; a packaged dataset's integer labels are first
    mapped through its own class names.

    Raises:
        PRXAIError: Some values are neither (the message lists them and the model's classes).
    """
    lower = {str(n).lower(): i for i, n in enumerate(label_names)}
    out: List[Optional[int]] = []
    unknown: Dict[str, int] = {}
    for value in labels:
        if value is None or (isinstance(value, str) and not value.strip()):
            out.append(None)
            continue
        if source_names is not None and isinstance(value, int) and 0 <= value < len(source_names):
            value = source_names[value]
        key = str(value).strip().lower()
        index: Optional[int] = lower.get(key)
        if index is None:
            try:
                number = float(key)
            except ValueError:
                number = None
            if number is not None and number.is_integer() and 0 <= int(number) < len(label_names):
                index = int(number)
        if index is None:
            unknown[str(value)] = unknown.get(str(value), 0) + 1
        out.append(index)
    if unknown:
        shown = ", ".join(f"{k!r} ({v}x)" for k, v in list(unknown.items())[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise PRXAIError(
            f"{source}: unknown labels {shown}{more}; the model's classes are "
            f"{', '.join(f'{i}={n}' for i, n in enumerate(label_names))} (give names or indices), "
            "or leave out the label column."
        )
    return out


# ============================================================================ output
def score_column(method: str) -> str:
    """Output column of a method's scores: ``"pr-g"`` -> ``"scores_pr_g"``."""
    return "scores_" + "".join(c if c.isalnum() else "_" for c in method)


def _schema(methods: Sequence[str], metadata: Dict[str, Any]) -> Any:
    import pyarrow as pa

    fields = [
        pa.field("row", pa.int64()),
        pa.field("id", pa.string()),
        pa.field("input_hash", pa.string()),
        pa.field("label", pa.int64()),
        pa.field("skip_reason", pa.string()),
        pa.field("n_tokens", pa.int64()),
        pa.field("truncated", pa.bool_()),
        pa.field("windows", pa.int64()),
        pa.field("tokens", pa.list_(pa.string())),
        pa.field("predicted", pa.int64()),
        pa.field("probabilities", pa.list_(pa.float64())),
        pa.field("target", pa.int64()),
    ] + [pa.field(score_column(m), pa.list_(pa.float32())) for m in methods]
    return pa.schema(fields, metadata={METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()})


def input_hash(run_key: str, id: str, digest: str, label: Optional[int]) -> str:
    """The key of one input row: a hash of the run's settings, its id, its text and its label.

    ``digest`` is the text's :func:`text_digest`.

    A finished row is reused on resume only when the input row with its id
    still has this hash (and the same row number), so an edited text, a
    changed label or other settings are recomputed, never read back.
    """
    blob = json.dumps([run_key, id, digest, label], ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:20]


#: the file names the runner gives its shards (nothing else in the folder is ever deleted)
SHARD_NAME = re.compile(r"^part-\d{9}-[0-9a-f]{10}\.(parquet|jsonl)$")


def shard_name(rows: Sequence[int], ids: Sequence[str], fmt: str) -> str:
    """``part-<first row>-<digest of the ids>.<fmt>``: the same shard always gets the same name."""
    digest = hashlib.sha1("\x00".join(ids).encode("utf-8")).hexdigest()[:10]
    return f"part-{min(rows):09d}-{digest}.{fmt}"


def _read_shard(path: Path, fmt: str, columns: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Rows of one shard file.

    Raises:
        PRXAIError: The file is damaged (truncated, not Parquet / JSON Lines, rows without ``row`` and ``id``).
    """
    try:
        if fmt == "parquet":
            _require_pyarrow("reading Parquet results")
            import pyarrow.parquet as pq

            rows = pq.read_table(str(path), columns=list(columns) if columns else None).to_pylist()
        else:
            rows = []
            text = path.read_bytes().decode("utf-8")
            if text and not text.endswith("\n"):
                raise ValueError("the last line is cut short (no newline at its end)")
            for line_no, line in enumerate(text.split("\n"), 1):
                if line.strip():
                    rec = json.loads(line)
                    if not isinstance(rec, dict):
                        raise ValueError(f"line {line_no} is not a JSON object")
                    rows.append({k: rec.get(k) for k in columns} if columns else rec)
        for row in rows:
            if not isinstance(row.get("row"), int) or not isinstance(row.get("id"), str):
                raise ValueError("a row without its row number or id")
        ordered = sorted(rows, key=lambda r: r["row"])
        if not rows or shard_name([r["row"] for r in ordered], [r["id"] for r in ordered], fmt) != path.name:
            raise ValueError("its rows are not those its name was given for: rows are missing")
    except PRXAIError:
        raise
    except Exception as err:  # ArrowInvalid, OSError, JSONDecodeError, UnicodeDecodeError, ValueError, ...
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise PRXAIError(f"damaged shard {path} ({first})") from None
    return rows


class ShardStore:
    """The output folder: the manifest, the finished shards, atomic writes.

    The manifest (``_run.json``) holds the run's settings and the names of
    the shards it wrote (``"shards"``); a shard is listed before its file is
    written, so every shard file of the run is listed. Only listed shards are
    read back, recomputed or deleted: other files in the folder (a user's
    ``part-notes.txt``) are never touched.

    Args:
        folder: Output folder (created).
        fmt: ``"parquet"`` or ``"jsonl"``.
        methods: Method names (one score column each).
        metadata: The run's settings, stored in the manifest and in every
            Parquet shard's schema metadata (key ``captum_prxai``).
    """

    def __init__(self, folder: str | os.PathLike, fmt: str, methods: Sequence[str],
                 metadata: Dict[str, Any]) -> None:
        if fmt not in FORMATS:
            raise PRXAIError(f"unknown output format {fmt!r}; choose from: {', '.join(FORMATS)}.")
        if fmt == "parquet":
            _require_pyarrow("writing Parquet (use --format jsonl to write JSON Lines without it)")
        self.folder = Path(folder)
        self.fmt = fmt
        self.methods = list(methods)
        self.metadata = dict(metadata)
        self.listed: set = set()

    # ------------------------------------------------------------------ setup
    def check_writable(self) -> None:
        """Create the folder and write a probe file in it.

        Raises:
            PRXAIError: The output is a file or cannot be written.
        """
        folder = self.folder
        if folder.exists() and not folder.is_dir():
            raise PRXAIError(f"output {folder} is a file; give a folder (the results are written as shards in it).")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            raise PRXAIError(f"cannot write to the output folder {folder}: {err.strerror or err}.") from None

    def prepare(self, overwrite: bool = False) -> None:
        """Check the folder is writable, then check or write the manifest.

        Raises:
            PRXAIError: The folder cannot be written, is a file, or holds the
                results of other settings (unless ``overwrite``, which deletes
                that run's own shards, the ones its manifest lists, and nothing else).
        """
        self.check_writable()
        folder = self.folder
        self._remove_temporaries()  # a killed run's unfinished writes
        manifest = folder / MANIFEST
        mine = {"key": self.metadata["run_key"], "format": self.fmt}
        if manifest.is_file():
            try:
                old = json.loads(manifest.read_text(encoding="utf-8"))
                if not isinstance(old, dict):
                    raise ValueError
            except ValueError:
                old = {}
            theirs = {"key": old.get("run_key"), "format": old.get("format")}
            if theirs != mine:
                version = self.metadata.get("format_version")
                if not overwrite and old.get("format_version") != version and "format_version" in old:
                    raise PRXAIError(
                        f"{folder} holds results of an older output layout ({old.get('format_version')}; this "
                        f"version writes {version}, whose rows carry the input hash resuming needs); use another "
                        "--output folder, or pass --overwrite to delete them."
                    )
                if not overwrite:
                    raise PRXAIError(
                        f"{folder} holds results of other settings (model, methods, options or format differ: "
                        f"see {manifest}); use another --output folder, or pass --overwrite to delete them."
                    )
                self._delete_shards(old)
            else:
                self.listed = {n for n in old.get("shards", []) if isinstance(n, str) and SHARD_NAME.match(n)}
        else:
            strays = self._strays()
            if strays:
                if not overwrite:
                    raise PRXAIError(f"{folder} holds shard files ({strays[0].name}, ...) but no {MANIFEST}; use "
                                     "another --output folder, or pass --overwrite to delete them.")
                for path in strays:
                    path.unlink()
        self._save_manifest()

    def _strays(self) -> List[Path]:
        """Files named as this runner names its shards, of any format, that the manifest does not list."""
        return sorted(p for p in self.folder.iterdir()
                      if p.is_file() and SHARD_NAME.match(p.name) and p.name not in self.listed)

    def _delete_shards(self, old_manifest: Dict[str, Any]) -> None:
        """Delete the shards another run's manifest lists (a manifest of before the list: files named as shards)."""
        names = old_manifest.get("shards")
        if not isinstance(names, list):
            names = [p.name for p in self.folder.iterdir() if SHARD_NAME.match(p.name)]
        for name in names:
            if isinstance(name, str) and SHARD_NAME.match(name) and (self.folder / name).is_file():
                (self.folder / name).unlink()

    def _remove_temporaries(self) -> None:
        for tmp in list(self.folder.glob(".part-*.tmp")) + list(self.folder.glob(f".{MANIFEST}.*.tmp")):
            try:
                tmp.unlink()
            except OSError:
                pass

    def _save_manifest(self) -> None:
        data = dict(self.metadata, shards=sorted(self.listed))
        self._atomic_write(self.folder / MANIFEST, json.dumps(data, indent=2, sort_keys=True).encode("utf-8"))

    def clear(self) -> None:
        """Delete the run's own shards (those the manifest lists) and the manifest."""
        for name in sorted(self.listed):
            if (self.folder / name).is_file():
                (self.folder / name).unlink()
        self.listed = set()
        if (self.folder / MANIFEST).is_file():
            (self.folder / MANIFEST).unlink()

    def shards(self) -> List[Path]:
        """The run's shard files (listed in the manifest and present)."""
        return [self.folder / n for n in sorted(self.listed) if (self.folder / n).is_file()]

    def finished(self) -> Tuple[Dict[str, List[Tuple[int, str, Optional[str]]]], List[str]]:
        """What the finished shards hold, and the damaged shards found (deleted, so they are recomputed).

        Returns:
            ``({shard name: [(row, id, input_hash), ...]}, [one line per damaged shard])``.
        """
        held: Dict[str, List[Tuple[int, str, Optional[str]]]] = {}
        damaged: List[str] = []
        for name in sorted(self.listed):
            path = self.folder / name
            if not path.is_file():  # listed, then the run stopped before the file was written
                continue
            try:
                rows = _read_shard(path, self.fmt, ["row", "id", "input_hash"])
            except PRXAIError as err:
                damaged.append(str(err))
                path.unlink()
                continue
            held[name] = [(r["row"], r["id"], r.get("input_hash")) for r in rows]
        missing = {n for n in self.listed if n not in held}
        if missing:
            self.listed -= missing
            self._save_manifest()
        return held, damaged

    def remove(self, names: Sequence[str]) -> None:
        """Delete these shards of the run (stale ones), then drop them from the manifest."""
        for name in names:
            if name in self.listed and (self.folder / name).is_file():
                (self.folder / name).unlink()
        self.listed -= set(names)
        self._save_manifest()

    # ------------------------------------------------------------------ writing
    def _atomic_write(self, path: Path, data: bytes) -> None:
        """Write ``data`` to a hidden temporary file, fsync, rename; on failure remove the temporary file.

        Raises:
            PRXAIError: The file system refused (disk full, quota, permissions): the message names the path.
        """
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as err:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise PRXAIError(f"cannot write {path}: {err.strerror or err}; the finished shards are kept, free some "
                             "space (or fix the folder) and rerun the same command to resume.") from None
        except BaseException:  # KeyboardInterrupt mid-write: no half-written temporary file stays behind
            try:
                tmp.unlink()
            except OSError:
                pass
            raise

    def write(self, rows: List[Dict[str, Any]]) -> Path:
        """Write one shard (rows sorted by input row) atomically; returns its path.

        The shard is listed in the manifest first, so a run stopped between
        the two leaves a listed name without a file (harmless), never an
        unlisted file.
        """
        rows = sorted(rows, key=lambda r: r["row"])
        path = self.folder / shard_name([r["row"] for r in rows], [r["id"] for r in rows], self.fmt)
        if path.name not in self.listed:
            self.listed.add(path.name)
            self._save_manifest()
        if self.fmt == "jsonl":
            data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
            self._atomic_write(path, data)
            return path
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = _schema(self.methods, self.metadata)
        table = pa.Table.from_pylist(rows, schema=schema)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        self._atomic_write(path, buffer.getvalue())
        return path


def _manifest(folder: Path) -> Dict[str, Any]:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise PRXAIError(f"{folder} holds no results ({MANIFEST} is missing).")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise PRXAIError(f"{manifest} is damaged ({err}); rerun attribute-dataset with --overwrite.") from None
    return data


def read_results(folder: str | os.PathLike) -> List[Dict[str, Any]]:
    """Every row of a finished (or partial) run, in input order, as dicts.

    For analysis, ``pandas.read_parquet(folder)`` (or
    ``pandas.read_json(path, lines=True)`` per JSON Lines shard) reads the same
    table; this helper needs no pandas and sorts by ``row``. It reads the
    shards the manifest lists.

    Raises:
        PRXAIError: No manifest, or a damaged shard (rerun the same
            ``attribute_dataset`` call: it recomputes damaged shards).
    """
    folder = Path(folder)
    data = _manifest(folder)
    fmt = data.get("format", "parquet")
    names = data.get("shards")
    if not isinstance(names, list):  # a manifest written before the shard list
        names = [p.name for p in folder.glob(f"part-*.{fmt}")]
    rows: List[Dict[str, Any]] = []
    for name in sorted(names):
        path = folder / name
        if path.is_file():
            try:
                rows.extend(_read_shard(path, fmt))
            except PRXAIError as err:
                raise PRXAIError(f"{err}; rerun the same attribute-dataset command to recompute it.") from None
    return sorted(rows, key=lambda r: r["row"])


def read_metadata(folder: str | os.PathLike) -> Dict[str, Any]:
    """The run's settings (model, methods, options) from the output folder's manifest (without its shard list)."""
    data = _manifest(Path(folder))
    data.pop("shards", None)
    return data
