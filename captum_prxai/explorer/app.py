"""The explorer's web application (Flask): JSON API plus a small static front end.

Endpoints (all JSON unless noted; errors are ``{"error": "..."}`` with a 4xx status):

* ``GET /`` -- the page; ``GET /static/app.js``, ``/static/style.css`` -- its
  script and style (fixed names inside the package; nothing else is served);
  ``GET /prx-style.css`` -- the heatmap CSS of :mod:`captum_prxai.viz.html`.
* ``GET /api/info`` -- model, classes, datasets, methods, parameters, limits.
* ``GET /api/examples?dataset=&q=&label=&predicted=&correct=&start=&limit=&budget=``
  -- one page of filtered examples, with (cached) predictions; ``budget``
  bounds the new predictions of one call (the page calls again and shows
  the progress).
* ``POST /api/estimate`` -- the explain body: each method's estimated model
  evaluations and seconds.
* ``POST /api/explain`` -- ``{"text" | "example": {"dataset", "index"},
  "methods": [...], "params": {...}, "target", "truncate", "merge_subwords",
  "confirmed"}``; returns the prediction at once and a job whose methods run
  in the background (``409`` with the estimate when the job would take
  longer than ``confirm_seconds`` and ``confirmed`` is not true; ``422`` when
  a method is over ``max_method_seconds``).
* ``GET /api/jobs/<id>?merge_subwords=&palette=&scale=&share=`` polls a job;
  ``POST /api/jobs/<id>/cancel`` cancels it. A job belongs to the client
  that created it (its session: the ``X-PRXAI-Session`` header the page
  sends, else the ``prxai_session`` cookie the server sets); another
  client gets 404 for its id. A client may have
  :data:`ACTIVE_JOBS_PER_CLIENT` unfinished jobs (429 beyond them).
* ``POST /api/graph`` -- the same input plus ``"method"`` (a PR-XAI method),
  ``"top_edges"``, ``"nodes"``, ``"layout"``, ``"walk"`` (``"positive"`` or, for a method that walks
  both signs, ``"negative"``), ``"confirmed"``: a job of the client (``"kind": "graph"``) that draws
  the graph PageRank ran on, as SVG, under the same cost limits (422, 409), quota (429),
  lane (``"fast"``), ownership and cancel as ``/api/explain``; polled at
  ``/api/jobs/<id>``, whose ``"graph"`` holds the drawing once it is done
  (200 at once for a drawing in the cache, else 202).
* ``POST /api/export`` -- ``{"job": id | [id, ...], "merge_subwords", "palette", "scale", "graph":
  {"method", "top_edges", "nodes", "layout", "walk"} | null, "confirmed"}``: the jobs' results as
  shown (several ids: the models side by side, one section each), as a
  standalone HTML download. It also accepts the explain body: that runs as
  a job of the client, with the same cost limits, lanes and cancel as
  ``/api/explain``, and is cancelled when the client leaves. The graph is
  drawn by a graph job of the client, waited for and cancelled the same
  way (a drawing in the cache is used at once). Built in memory.
* ``GET /api/stats`` -- cache and memory counters.

Every request body must be a JSON object without ``NaN`` / ``Infinity``,
unpaired surrogates, or nesting deeper than :data:`MAX_DEPTH`; state-changing
requests and every ``/api/`` request from another origin (``Origin`` /
``Referer`` of another host, or a browser's ``Sec-Fetch-Site`` of another
site) are refused. The server never reads or writes a path taken from a request.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import uuid
from importlib import resources
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from captum_prxai.exceptions import PRXAIError
from captum_prxai.explorer.engine import DatasetStore, Encoded, Engine, InputTooLong, JobCancelled, TooCostly
from captum_prxai.viz.html import escape as _esc
from captum_prxai.explorer.jobs import Job, JobRunner
from captum_prxai.explorer.params import check_flag, check_params, param_specs

__all__ = ["create_app", "LOOPBACK_HOSTS", "STATIC_FILES", "MAX_DEPTH", "PALETTES", "SCALES", "TOP_TOKENS",
           "ACTIVE_JOBS_PER_CLIENT", "SESSION_HEADER", "SESSION_COOKIE", "featured_methods", "parse_json_body",
           "recolor_heatmap"]

logger = logging.getLogger("captum_prxai.explorer")

#: Host names accepted by default (guards a loopback server against DNS rebinding).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
#: The only files served from the package's static folder: URL name -> content type.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
MAX_METHODS = 16
#: The page's largest settings are those estimated under this share of ``max_method_seconds``.
ESTIMATE_HEADROOM = 0.8
#: Deepest nesting of arrays / objects accepted in a request body.
MAX_DEPTH = 16
#: Heatmap palettes: name -> (colour for, colour against, unsigned top colour). "colorblind" is blue/orange
#: (distinguishable with red-green colour blindness); "default" is the library's red/green.
PALETTES: Dict[str, Optional[Tuple[Tuple[int, int, int], Tuple[int, int, int], Tuple[int, int, int]]]] = {
    "default": None,
    "colorblind": ((33, 102, 172), (230, 97, 1), (33, 102, 172)),
}
#: Colour scales of the heatmaps: each its own, shared by the heatmaps of one row (one text), or by every row shown.
SCALES = ("own", "row", "all")
#: Top tokens listed per method, on the cards and in the export (the same list).
TOP_TOKENS = 5
#: Jobs one client (page session) may have running or queued at once.
ACTIVE_JOBS_PER_CLIENT = 8
#: Request header carrying the page's session (a random id the page makes when it loads).
SESSION_HEADER = "X-PRXAI-Session"
#: Cookie carrying the session of a client that sends no session header.
SESSION_COOKIE = "prxai_session"
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'self' http://localhost:* http://127.0.0.1:*")
_FAMILY_NAMES = {"pr-xai": "PR-XAI", "attention": "Attention baselines", "gradient": "Captum gradients",
                 "perturbation": "Captum perturbations", "control": "Control"}


class _HTTPError(PRXAIError):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def featured_methods(registered: Iterable[str]) -> List[str]:
    """The registered methods a picker shows first (:data:`captum_prxai.methods.FEATURED_METHODS`)."""
    from captum_prxai.methods import FEATURED_METHODS

    names = set(registered)
    return [m for m in FEATURED_METHODS if m in names]


def _session() -> str:
    """The requesting client's session: the page's ``X-PRXAI-Session`` header, else the cookie (a new one if none)."""
    from flask import g, request

    for sid in (request.headers.get(SESSION_HEADER, ""), request.cookies.get(SESSION_COOKIE, "")):
        if re.fullmatch(r"[0-9a-f]{32}", sid or ""):
            return sid
    if "prxai_new_session" not in g:
        g.prxai_new_session = uuid.uuid4().hex
    return g.prxai_new_session


def _ipv6_loopback(url: str) -> bool:
    """Whether ``url`` is on the IPv6 loopback address (``http://[::1]:8888/...``)."""
    try:
        return urlsplit(url).hostname == "::1"
    except ValueError:
        return False


def _client_gone() -> bool:
    """Whether the client of the current request closed its connection (Werkzeug's server; else ``False``)."""
    from flask import request

    sock = request.environ.get("werkzeug.socket")
    dontwait = getattr(socket, "MSG_DONTWAIT", None)  # not on Windows: there the export waits for its job
    if sock is None or dontwait is None:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK | dontwait) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _text_option(source: Mapping[str, Any], key: str, default: str, choices: Sequence[str]) -> str:
    """A string option of a request: ``default`` only when left out (or null); a value not in ``choices`` is refused."""
    value = source.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or value not in choices:
        raise PRXAIError(f"{key!r} must be one of {', '.join(choices)}; got {str(value)[:30]!r}.")
    return value


def _top_table_html(results: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> str:
    """The results' top tokens (their ``"top"`` lists, as the cards show them) side by side, as an HTML table."""
    def _fmt_score(x: float) -> str:
        return "0" if x == 0 else f"{x:.4g}" if abs(x) >= 1e-3 else f"{x:.3e}"

    head = "".join(f"<th>{_esc(r['label'])}</th>" for r in results)
    rows = []
    for k in range(max((len(r["top"]) for r in results), default=0)):
        cells = "".join(f"<td>{_esc(r['top'][k][0])} <small>({_esc(_fmt_score(r['top'][k][1]))})</small></td>"
                        if k < len(r["top"]) else "<td></td>" for r in results)
        rows.append(f'<tr><td class="prx-num">{k + 1}</td>{cells}</tr>')
    left_out = ("special tokens and the explained token" if info.get("explained_position") is not None
                else "special tokens")
    return ('<table class="prx-top"><caption style="text-align:left">Top tokens per method (largest |score|, '
            f"{left_out} left out)</caption><tr><th>#</th>{head}</tr>{''.join(rows)}</table>")


def _html_download(page: str, text: str, prefix: str, fallback: str) -> Any:
    """A Flask response that downloads ``page`` as ``<prefix>-<slug of text>.html`` (the export routes)."""
    from flask import Response

    slug = re.sub(r"[^a-z0-9]+", "-", text[:40].lower()).strip("-") or fallback
    resp = Response(page, content_type="text/html; charset=utf-8")
    resp.headers["Content-Disposition"] = f'attachment; filename="{prefix}-{slug}.html"'
    return resp


def _static(name: str) -> bytes:
    return (resources.files("captum_prxai.explorer") / "static" / name).read_bytes()


def _reject_constant(name: str) -> Any:
    raise _HTTPError(400, f"the request body contains {name}, which JSON does not allow; send finite numbers.")


def parse_json_body(raw: bytes) -> Dict[str, Any]:
    """Parse a request body strictly: a JSON object, finite numbers, valid Unicode, at most :data:`MAX_DEPTH` deep.

    Raises:
        PRXAIError: With ``status`` 400 and a message saying what is wrong.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _HTTPError(400, f"the request body is not UTF-8 (byte {err.start}).") from None
    depth = 0
    for ch in re.finditer(r'[\[\]{}]|"(?:[^"\\]|\\.)*"', text):  # cheap nesting check before json.loads
        c = ch.group(0)
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _HTTPError(400, f"the request body is nested more than {MAX_DEPTH} levels deep.")
        elif c in "]}":
            depth -= 1
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise _HTTPError(400, f"the request body is nested more than {MAX_DEPTH} levels deep.") from None
    except ValueError as err:
        if isinstance(err, PRXAIError):
            raise
        msg = getattr(err, "msg", str(err))
        where = f" (line {err.lineno}, column {err.colno})" if hasattr(err, "lineno") else ""
        raise _HTTPError(400, f"the request body is not valid JSON: {msg}{where}.") from None
    if not isinstance(data, dict):
        raise _HTTPError(400, "send a JSON object with the header Content-Type: application/json.")
    stack: List[Tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        items: Iterable[Tuple[Any, Any]] = ()
        if isinstance(value, dict):
            items = ((k, v) for k, v in value.items())
        elif isinstance(value, list):
            items = enumerate(value)
        for key, item in items:
            path = f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]"
            for s in (key, item):
                if isinstance(s, str):
                    try:
                        s.encode("utf-8")
                    except UnicodeEncodeError as err:
                        raise _HTTPError(400, f"the request contains an unpaired surrogate "
                                              f"(\\u{ord(s[err.start]):04x}) in {path.lstrip('.')!r} "
                                              "(invalid Unicode); remove it.") from None
            if isinstance(item, (dict, list)):
                stack.append((item, path))
    return data


def _interpolate(t: float, end: Tuple[int, int, int]) -> Tuple[int, int, int]:
    return tuple(round(255 + (e - 255) * t) for e in end)  # type: ignore[return-value]


def recolor_heatmap(html: str, palette: str) -> str:
    """Recolour a :func:`captum_prxai.viz.html.token_heatmap_html` fragment with a palette of :data:`PALETTES`.

    Each token's colour intensity on the library's scale is kept; only the
    hue changes (for ``"colorblind"``: blue for, orange against).
    """
    from captum_prxai.viz import _colors

    if palette not in PALETTES:
        raise PRXAIError(f"palette must be one of {', '.join(PALETTES)}, got {str(palette)[:30]!r}.")
    colours = PALETTES[palette]
    if colours is None:
        return html
    pos, neg, seq = colours
    parts = html.split('<div class="prx-heatmap"')
    out = [parts[0]]
    for part in parts[1:]:
        signed = part.lstrip().split(">", 1)[0].find('data-signed="true"') >= 0
        ends = ([(_colors.POSITIVE_MAX, pos), (_colors.NEGATIVE_MAX, neg)] if signed
                else [(_colors.SEQUENTIAL_MAX, seq)])
        out.append(_recolor_part(part, ends))
    return '<div class="prx-heatmap"'.join(out)


def _recolor_part(html: str, ends: Sequence[Tuple[Tuple[int, int, int], Tuple[int, int, int]]]) -> str:
    from captum_prxai.viz import _colors

    def convert(rgb: Tuple[int, int, int]) -> Tuple[int, int, int]:
        best, err_best = rgb, float("inf")
        for old, new in ends:
            ch = max(range(3), key=lambda i: abs(255 - old[i]))
            t = max(0.0, min(1.0, (255 - rgb[ch]) / (255 - old[ch])))
            err = sum(abs(a - b) for a, b in zip(_interpolate(t, old), rgb))
            if err < err_best:
                best, err_best = _interpolate(t, new), err
        return best

    def bg(match: "re.Match[str]") -> str:
        c = convert((int(match.group(1)), int(match.group(2)), int(match.group(3))))
        return f"background-color:{_colors.css_rgb(c)};color:{_colors.css_rgb(_colors.text_on(c))}"

    def plain(match: "re.Match[str]") -> str:
        return _colors.css_rgb(convert((int(match.group(1)), int(match.group(2)), int(match.group(3)))))

    html = re.sub(r"background-color:rgb\((\d+),(\d+),(\d+)\);color:rgb\(\d+,\d+,\d+\)", bg, html)
    html = re.sub(r"linear-gradient\(to right,[^\"]*\)", lambda m: re.sub(
        r"rgb\((\d+), ?(\d+), ?(\d+)\)", plain, m.group(0)), html)
    return html.replace("red: against, green: for the explained class",
                        "orange: against, blue: for the explained class")


class _Explorer:
    """What one explorer application serves, and the request helpers its routes share.

    Holds the dataset store, one :class:`~captum_prxai.explorer.engine.Engine`
    and one :class:`~captum_prxai.explorer.jobs.JobRunner` per model (the first,
    ``model_name``, then the ``compare`` models), the registered methods and
    the methods ticked when the page opens. Built by :func:`create_app`, which
    validates its arguments first.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        store: DatasetStore,
        dataset: str,
        *,
        model_name: str,
        max_chars: int,
        cache_size: int,
        allowed_hosts: Optional[Iterable[str]],
        default_methods: Optional[Sequence[str]],
        memory_budget_mb: float,
        max_method_seconds: float,
        confirm_seconds: float,
        forward_func: Optional[Any],
        compare: Optional[Mapping[str, Tuple[Any, Any]]],
    ) -> None:
        self.store = store
        self.dataset = dataset
        self.model = model
        self.model_name = model_name
        self.max_chars = max_chars
        self.cache_size = cache_size
        self.memory_budget_mb = memory_budget_mb
        self.max_method_seconds = max_method_seconds
        self.confirm_seconds = confirm_seconds
        self.engines: Dict[str, Engine] = {model_name: self.make_engine(model, tokenizer, forward_func)}
        for other, pair in (compare or {}).items():
            if other in self.engines:
                raise PRXAIError(f"two models are named {other!r}; give each model its own name.")
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise PRXAIError(f"compare[{other!r}] must be a (model, tokenizer) pair.")
            self.engines[str(other)] = self.make_engine(pair[0], pair[1], None)
        self.engine = self.engines[model_name]
        self.hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.registered = {m["name"]: m for m in self.engine.methods()}
        if default_methods is None:
            default_methods = (self.engine.default_pr_method(), "ig")
        self.defaults = [m for m in default_methods if m in self.registered]
        self.runners = {name: self.make_runner(eng) for name, eng in self.engines.items()}
        self.runner = self.runners[model_name]

    # ------------------------------------------------------------------ engines and runners
    def make_engine(self, m: Any, t: Any, fwd: Optional[Any]) -> Engine:
        return Engine(m, t, self.store, max_chars=self.max_chars, cache_size=self.cache_size,
                      memory_budget_mb=self.memory_budget_mb, max_method_seconds=self.max_method_seconds,
                      confirm_seconds=self.confirm_seconds, forward_func=fwd)

    @staticmethod
    def make_runner(eng: Engine) -> JobRunner:
        def run_method(job: Job, name: str) -> Dict[str, Any]:
            p = job.payload
            if p.get("kind") == "graph":
                return eng.graph_svg(p["enc"], p["target"], name, p["params"], cancel=job.cancel_event,
                                     progress=lambda n: job.add_rows(name, n), **p["graph"])
            return eng.explain(p["enc"], p["target"], name, p["params"],
                               cancel=job.cancel_event, progress=lambda n: job.add_rows(name, n))

        def lane_of(name: str) -> str:
            spec = eng.resolve(name)
            return eng.lane_of(spec.name, spec.family)

        return JobRunner(run_method, lane_of=lane_of, cancelled=(JobCancelled,),
                         active_per_owner=ACTIVE_JOBS_PER_CLIENT)

    def pick(self, source: Any) -> Tuple[str, Engine, JobRunner]:
        name = source.get("model") if hasattr(source, "get") else None
        if name is None or name == "":
            name = self.model_name
        if not isinstance(name, str) or name not in self.engines:
            raise PRXAIError(f"unknown model {str(name)[:60]!r}; the explorer serves: {', '.join(self.engines)}.")
        return name, self.engines[name], self.runners[name]

    # ------------------------------------------------------------------ reading requests
    @staticmethod
    def payload() -> Dict[str, Any]:
        from flask import current_app, request
        from werkzeug.exceptions import RequestEntityTooLarge

        if not request.is_json:
            raise _HTTPError(400, "send a JSON object with the header Content-Type: application/json.")
        limit = int(current_app.config["MAX_CONTENT_LENGTH"])
        if request.content_length is not None and request.content_length >= limit:
            raise RequestEntityTooLarge()
        parts, size = [], 0
        while size < limit:  # also bounds a chunked body, which has no Content-Length
            chunk = request.stream.read(limit - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        if size >= limit:
            raise RequestEntityTooLarge()
        return parse_json_body(b"".join(parts))

    @staticmethod
    def arg_int(name: str, default: Optional[int] = None) -> Optional[int]:
        from flask import request

        raw = request.args.get(name, "")
        if raw == "":
            return default
        if not re.fullmatch(r"-?\d{1,9}", raw):
            raise PRXAIError(f"query parameter {name!r} must be an integer, got {raw[:40]!r}.")
        return int(raw)

    def resolve_input(self, eng: Engine, data: Mapping[str, Any]) -> Tuple[str, Dict[str, Any], Encoded]:
        truncate = check_flag(data, "truncate")
        if data.get("example") is not None:
            ex = data["example"]
            if not isinstance(ex, dict) or not isinstance(ex.get("index"), int) or isinstance(ex.get("index"), bool):
                raise PRXAIError("'example' must be {\"dataset\": name, \"index\": integer}.")
            name = ex.get("dataset")
            name = self.dataset if name is None else name
            if not isinstance(name, str):
                raise PRXAIError("'example.dataset' must be a dataset name.")
            ds = self.store.get(name)
            index = ex["index"]
            if not 0 <= index < len(ds.texts):
                raise PRXAIError(f"example {index} is out of range: {name} has {len(ds.texts)} examples.")
            text = ds.texts[index]
            label = int(ds.labels[index])
            source: Dict[str, Any] = {"kind": "example", "dataset": name, "index": index, "label": label,
                                      "label_name": str(ds.label_names[label])}
            return text, source, eng.encode(text, truncate=truncate)
        text, full_chars = eng.check_text(data.get("text"), truncate=truncate)
        return text, {"kind": "text"}, eng.encode(text, truncate=truncate, full_chars=full_chars)

    @staticmethod
    def resolve_target(data: Mapping[str, Any], probs: List[float]) -> int:
        target = data.get("target")
        predicted = max(range(len(probs)), key=probs.__getitem__)
        if target is None:
            return predicted
        if isinstance(target, bool) or not isinstance(target, int):
            raise PRXAIError(f"'target' must be a class index (integer) or null, got {str(target)[:40]!r}.")
        if not 0 <= target < len(probs):
            raise PRXAIError(f"target {target} is out of range: the model has classes 0..{len(probs) - 1}.")
        return target

    def resolve_methods(self, eng: Engine, data: Mapping[str, Any], params: Mapping[str, Any]) -> List[str]:
        defaults = self.defaults
        methods = data.get("methods")
        if isinstance(methods, str):
            methods = methods.split(",")
        if not isinstance(methods, list) or not methods:
            raise PRXAIError(f"pick at least one method ('methods': [\"{defaults[0] if defaults else 'pr-g'}\", "
                             "\"ig\"]).")
        if len(methods) > 4 * MAX_METHODS:
            raise PRXAIError(f"at most {MAX_METHODS} methods at once; got {len(methods)}.")
        names: List[str] = []
        for raw in methods:
            spec, _, _, _ = eng.method_key(raw, params)  # validates name and parameters
            if spec.name not in names:
                names.append(spec.name)
        if len(names) > MAX_METHODS:
            raise PRXAIError(f"at most {MAX_METHODS} methods at once; got {len(names)}.")
        return names

    def parse_request(self, eng: Engine, data: Mapping[str, Any]
                      ) -> Tuple[Dict[str, Any], List[str], str, Dict[str, Any], Encoded]:
        params = check_params(data.get("params"))
        methods = self.resolve_methods(eng, data, params)
        text, source, enc = self.resolve_input(eng, data)
        check_flag(data, "merge_subwords")
        return params, methods, text, source, enc

    @staticmethod
    def display_options(source: Mapping[str, Any], job: Optional[Job] = None, query: bool = False
                        ) -> Tuple[bool, str, str, Optional[float]]:
        """``(merge_subwords, palette, scale, share)`` of a JSON body, or of query arguments.

        Each option takes its default only when it is left out (or null; an
        empty query argument); any other value of the wrong type or not among
        the choices is refused (400), never taken as the default. ``share``
        is the colour scale's top, as a share of each method's total
        ``|score|``, for ``scale="all"`` (the page sends the largest of the rows it shows).
        """
        default = job.payload["merge"] if job else False
        if not query:
            merge = check_flag(source, "merge_subwords", default)
            share = source.get("share")
        else:
            raw = source.get("merge_subwords", "")
            if raw not in ("", "true", "false"):
                raise PRXAIError(f"'merge_subwords' must be true or false, got {str(raw)[:20]!r}.")
            merge = default if raw == "" else raw == "true"
            source = {k: v for k, v in source.items() if v != ""}
            share = source.get("share")
            if share is not None:
                if not re.fullmatch(r"\d{1,3}(\.\d{1,17})?(e-?\d{1,3})?", str(share)):
                    raise PRXAIError(f"'share' must be a number between 0 and 1, got {str(share)[:30]!r}.")
                share = float(share)
        palette = _text_option(source, "palette", "default", tuple(PALETTES))
        scale = _text_option(source, "scale", "own", SCALES)
        if share is not None:
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= float(share) <= 1:
                raise PRXAIError(f"'share' must be a number between 0 and 1, got {str(share)[:30]!r}.")
            share = float(share)
        return merge, palette, scale, share

    # ------------------------------------------------------------------ answers
    @staticmethod
    def input_info(eng: Engine, text: str, source: Dict[str, Any], enc: Encoded, probs: List[float], target: int
                   ) -> Dict[str, Any]:
        predicted = max(range(len(probs)), key=probs.__getitem__)
        return {"text": text, "source": source, "tokens": enc.tokens, "n_tokens": len(enc.tokens),
                "truncated": enc.truncated, "full_length": enc.full_length, "chars": len(text),
                "full_chars": enc.full_chars, "label_names": eng.label_names,
                "probabilities": probs, "predicted": predicted, "predicted_name": eng.label_names[predicted],
                "target": target, "target_name": eng.label_names[target],
                "explained_position": eng.explained_position(enc)}

    @staticmethod
    def render(tokens: Sequence[str], result: Mapping[str, Any], merge: bool, palette: str,
               explained_position: Optional[int] = None, top: Optional[float] = None) -> str:
        from captum_prxai.viz.html import token_heatmap_html

        html = token_heatmap_html(tokens, result["scores"], method=result["label"], seconds=result["seconds"],
                                  merge_subwords=merge, explained_position=explained_position,
                                  signed=bool(result.get("signed")), top=top)
        return recolor_heatmap(html, palette)

    @staticmethod
    def scale_of(tokens: Sequence[str], result: Mapping[str, Any], merge: bool,
                 explained_position: Optional[int]) -> Dict[str, float]:
        """``{"top", "total", "share"}`` of one result's own colour scale.

        ``top`` is the score that gets the full colour on its own scale,
        ``total`` the sum of ``|score|`` over the words the scale counts
        (special tokens and the explained token left out), ``share`` their ratio.
        """
        from captum_prxai.viz import _colors
        from captum_prxai.viz.tokens import explained_word, is_special_token, shown_words

        words, values, groups = shown_words(tokens, result["scores"], merge)
        explained = explained_word(groups, explained_position)
        signed = bool(result.get("signed"))
        top = _colors.display_max(words, values, signed, explained=explained)
        ordinary = [abs(v) if signed else max(v, 0.0) for i, (w, v) in enumerate(zip(words, values))
                    if i != explained and not is_special_token(w)]
        total = sum(ordinary) or sum(abs(v) if signed else max(v, 0.0) for v in values)
        return {"top": top, "total": total, "share": top / total if total > 0 else 0.0}

    def decorate(self, results: Sequence[Dict[str, Any]], info: Mapping[str, Any], merge: bool, palette: str,
                 scale: str, share: Optional[float]) -> None:
        """Add each result's ``html``, ``scale`` and ``top`` tokens as shown with these display options.

        ``scale`` ``"own"``: each heatmap its own colour scale (full colour at
        its largest score); ``"row"``: one scale for the results given (one
        text), on the share of each method's total ``|score|``, so a method
        that puts more of its attribution on one word shows it darker;
        ``"all"``: the same, with the largest share ``share`` of every row shown.
        """
        from captum_prxai.viz.tokens import top_words

        tokens, explained = info["tokens"], info.get("explained_position")
        own = [self.scale_of(tokens, r, merge, explained) for r in results]
        row = max((o["share"] for o in own), default=0.0)
        shared = max(row, share or 0.0) if scale == "all" else row
        for result, o in zip(results, own):
            signed = bool(result.get("signed"))
            kind = "diverging scale centred on 0" if signed else "sequential scale from 0"
            if scale == "own" or shared <= 0 or o["total"] <= 0:
                top, text = o["top"], f"{kind}, its own: full colour at {o['top']:.3g}"
            else:
                top = shared * o["total"]
                where = "this row" if scale == "row" else "every row shown"
                text = (f"{kind}, shared by {where}: full colour at {100 * shared:.0f}% of the method's total "
                        f"|score| ({top:.3g} here)")
            result["html"] = self.render(tokens, result, merge, palette, explained, top)
            result["scale"] = {"mode": scale, "signed": signed, "top": top, "share": o["share"], "text": text}
            result["top"] = [[w, v] for w, v in top_words(tokens, result["scores"], merge, TOP_TOKENS, explained)]

    def job_json(self, job: Job, merge: Optional[bool] = None, palette: str = "default", scale: str = "own",
                 share: Optional[float] = None) -> Dict[str, Any]:
        snap = job.snapshot()
        info = job.payload["input"]
        merge = job.payload["merge"] if merge is None else merge
        snap["kind"] = job.payload.get("kind", "explain")
        if snap["kind"] == "graph":  # one drawing, no heatmap: ``graph`` once it is drawn
            snap["graph"] = snap["results"][0] if snap["results"] else None
        else:
            self.decorate(snap["results"], info, merge, palette, scale, share)
        snap["input"] = info
        snap["request"] = job.payload["request"]
        snap["merge_subwords"], snap["palette"], snap["scale"] = merge, palette, scale
        snap["model"] = job.payload["model"]
        snap["current_label"] = (self.engines[job.payload["model"]].resolve(snap["current"]).label
                                 if snap["current"] else None)
        return snap

    def start_job(self, data: Mapping[str, Any], owner: str) -> Tuple[Job, List[Dict[str, Any]]]:
        """Check an explain body and submit its job for ``owner``: the one path by which a request computes.

        The body's display options are checked first, then the cost: a
        method over ``max_method_seconds`` is refused (422), a job over
        ``confirm_seconds`` needs ``"confirmed": true`` (409), and the client
        must be under its quota of unfinished jobs (429). The methods run on
        their lanes and stop at a cancel.

        Returns:
            ``(job, estimates)``.
        """
        name_, eng, run = self.pick(data)
        params, methods, text, source, enc = self.parse_request(eng, data)
        self.display_options(data)
        confirmed = check_flag(data, "confirmed")
        run.check_quota(owner)
        probs = eng.predict(enc)
        target = self.resolve_target(data, probs)
        ests = self.estimates_of(eng, enc, target, methods, params)
        self.check_cost(eng, ests, confirmed)
        request_echo = {k: data[k] for k in ("methods", "params", "target", "truncate", "text", "example")
                        if k in data}
        request_echo.update(methods=methods, params=params, target=data.get("target"), model=name_)
        job = Job(methods, {"kind": "explain", "enc": enc, "target": target, "params": params,
                            "merge": check_flag(data, "merge_subwords"), "request": request_echo,
                            "model": name_,
                            "input": self.input_info(eng, text, source, enc, probs, target)},
                  estimates={e["method"]: e["seconds"] for e in ests}, owner=owner,
                  expected_rows={e["method"]: e["rows"] for e in ests})
        for name in methods:  # cached results are there at once
            if eng.cached(enc, target, name, params) is not None:
                job.record(name, eng.explain(enc, target, name, params))
        run.submit(job)
        return job, ests

    @staticmethod
    def check_cost(eng: Engine, ests: Sequence[Dict[str, Any]], confirmed: bool) -> None:
        """Refuse a method over ``max_method_seconds`` (422) and, unless ``confirmed``, a job over
        ``confirm_seconds`` (409, with the estimates)."""
        eng.check_cost(ests)
        total = sum(e["seconds"] for e in ests)
        if total > eng.confirm_seconds and not confirmed:
            costly = "; ".join(e["text"] for e in ests if e["seconds"] > 1)
            raise _HTTPError(409, f"this will take about {total:.0f} s ({costly}). Run it anyway, or lower the "
                                  "settings.", estimates=list(ests), seconds=total, needs_confirmation=True)

    def graph_request(self, eng: Engine, spec: Mapping[str, Any], params: Mapping[str, Any]
                      ) -> Tuple[str, Dict[str, Any]]:
        """``(method, drawing options)`` of a graph request, checked before anything is computed."""
        method = spec.get("method")
        method = eng.default_pr_method() if method is None else method
        if not isinstance(method, str):
            raise PRXAIError("'method' must be a method name.")
        kwargs: Dict[str, Any] = {}
        for key, default in (("top_edges", 30), ("nodes", 40)):
            value = spec.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int):
                raise PRXAIError(f"'{key}' must be an integer, got {str(value)[:40]!r}.")
            kwargs[key] = value
        kwargs["layout"] = _text_option(spec, "layout", "line", ("line", "circle"))
        kwargs["walk"] = _text_option(spec, "walk", "positive", ("positive", "negative"))
        return eng.resolve(method).name, eng.check_graph(method, params, **kwargs)

    def start_graph_job(self, name_: str, spec: Mapping[str, Any], params: Dict[str, Any], enc: Encoded,
                        target: int, info: Dict[str, Any], owner: str, confirmed: bool,
                        request_echo: Optional[Dict[str, Any]] = None) -> Job:
        """Submit the drawing of a graph as a job of ``owner``: the graph view's (and the export's) only path.

        The same checks as :meth:`start_job`: the request's options first,
        then the client's quota (429), the cost of the method's pass (422 over
        ``max_method_seconds``, 409 over ``confirm_seconds`` unless
        ``confirmed``). The pass runs on the ``"fast"`` lane and stops at a
        cancel; a drawing in the cache is there at once.
        """
        eng, run = self.engines[name_], self.runners[name_]
        method, drawing = self.graph_request(eng, spec, params)
        run.check_quota(owner)
        cached = eng.cached_graph(enc, target, method, params, drawing)
        est = eng.estimate(enc, method, params)
        label = f"{est['label']} graph"
        est.update(label=label, text=f"{label}: about {est['text'].split(': about ', 1)[-1]}")
        if cached is not None:
            est.update(seconds=0.0, text=f"{est['label']}: cached")
        self.check_cost(eng, [est], confirmed)
        echo = dict(request_echo or {}, methods=[method], params=params, model=name_, **drawing)
        job = Job([method], {"kind": "graph", "enc": enc, "target": target, "params": params, "graph": drawing,
                             "merge": False, "request": echo, "model": name_, "input": info},
                  estimates={method: est["seconds"]}, owner=owner, expected_rows={method: est["rows"]})
        if cached is not None:
            job.record(method, dict(cached, cached=True))
        return run.submit(job)

    @staticmethod
    def estimates_of(eng: Engine, enc: Encoded, target: int, methods: Sequence[str], params: Mapping[str, Any]
                     ) -> List[Dict[str, Any]]:
        out = []
        for name in methods:
            e = eng.estimate(enc, name, params)
            if eng.cached(enc, target, name, params) is not None:
                e.update(seconds=0.0, text=f"{e['label']}: cached")
            out.append(e)
        return out

    def await_job(self, job: Job, what: str) -> Job:
        """Wait for ``job`` to finish; cancel it (and answer 400) when the client closes its connection."""
        run = self.runners[job.payload["model"]]
        while not job.finished_event.wait(0.2):
            if _client_gone():
                run.cancel(job)
                raise _HTTPError(400, f"the client closed the connection; the {what} was cancelled.")
        return job

    def find_job(self, job_id: str, owner: str) -> Job:
        """The job ``job_id`` of the client ``owner`` (404 for an unknown id and for another client's job alike)."""
        if not re.fullmatch(r"[0-9a-f]{32}", job_id):
            raise _HTTPError(404, f"no job {job_id[:40]!r}.")
        job = next((r.get(job_id, owner) for r in self.runners.values() if r.get(job_id, owner) is not None), None)
        if job is None:
            raise _HTTPError(404, f"no job {job_id!r} in this page's session; it may have expired, explain again.")
        return job

    def export_page(self, jobs: Sequence[Job], merge: bool, palette: str, scale: str, share: Optional[float],
                    drawn: Optional[Mapping[str, Any]]) -> str:
        """The standalone HTML page of ``jobs`` (one per model) as the page shows them.

        One section per job: its model, prediction and explained class, its
        finished heatmaps with the colour scales of the screen (``scale``),
        and its top tokens (the cards' lists); then the graph ``drawn`` (the
        answer of a graph job of the first job's input, see :meth:`export_graph`), if any.
        """
        from captum_prxai.viz.html import STYLE

        sections = []
        results_of = [[dict(j.results[m]) for m in j.methods if m in j.results] for j in jobs]
        if scale == "all":  # one scale for every section, as the page's columns share it
            share = max([share or 0.0] + [self.scale_of(j.payload["input"]["tokens"], r, merge,
                                                        j.payload["input"].get("explained_position"))["share"]
                                          for j, rs in zip(jobs, results_of) for r in rs])
        first = jobs[0].payload
        labels = self.engines[first["model"]].label_names
        text, source = first["input"]["text"], first["input"]["source"]
        for job, results in zip(jobs, results_of):
            info = job.payload["input"]
            self.decorate(results, info, merge, palette, scale, share)
            names = info["label_names"]
            described = ", ".join(f"{r['label']} ({', '.join(f'{k}={v}' for k, v in r['params'].items())})"
                                  if r["params"] else r["label"] for r in results)
            missing = [self.engines[job.payload["model"]].resolve(m).label for m in job.methods
                       if m not in job.results]
            note = f"; not finished when exported: {_esc(', '.join(missing))}" if missing else ""
            head = f"<h2>model: {_esc(job.payload['model'])}</h2>" if len(jobs) > 1 else ""
            cards = "".join(f'{r["html"]}<p class="prx-meta prx-scale">colours: {_esc(r["scale"]["text"])}</p>'
                            for r in results)
            sections.append(
                f'<section class="prx-model" data-model="{_esc(job.payload["model"])}">{head}'
                f'<p class="prx-meta">model: {_esc(job.payload["model"])}; predicted: '
                f'<b>{_esc(info["predicted_name"])}</b> (p = {info["probabilities"][info["predicted"]]:.3f}); '
                f'explained class: {_esc(names[info["target"]])}; {info["n_tokens"]} tokens; '
                f"methods: {_esc(described)}{note}</p>{cards}{_top_table_html(results, info)}</section>")
        extra = ""
        if drawn:
            extra = (f"<h2>{_esc(drawn['label'])} graph</h2><p class=\"prx-meta prx-graph-title\">"
                     f"{_esc(drawn['title'])}</p><div class=\"prx-graph\">{drawn['svg']}</div>")
        title = f"Why {labels[first['target']]}? {text[:80]}{'...' if len(text) > 80 else ''}"
        where = (f"source: {_esc(source['dataset'])} #{source['index']} (true class {_esc(source['label_name'])})"
                 if source["kind"] == "example" else "typed text")
        body = (f"<h1>{_esc(title)}</h1><p class=\"prx-meta\">{where}</p>" + "".join(sections) + extra
                + '<p class="prx-foot">Generated by the captum-prxai explorer (PR-XAI: PageRank-based attribution '
                  "for transformers).</p>")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{_esc(title)}</title><style>{STYLE}"
                ".prx-graph svg{max-width:100%;height:auto;display:block}</style></head>"
                f'<body><main class="prx-page">{body}</main></body></html>\n')

    def export_graph(self, job: Job, spec: Mapping[str, Any], owner: str, confirmed: bool) -> Dict[str, Any]:
        """The graph of ``job``'s input drawn for an export: a graph job of ``owner``, waited for."""
        p = job.payload
        graph_job = self.start_graph_job(p["model"], spec, p["params"], p["enc"], p["target"], p["input"], owner,
                                         confirmed)
        self.await_job(graph_job, "export's graph job")
        if graph_job.results:
            return next(iter(graph_job.results.values()))
        error = next(iter(graph_job.errors.values()), "not drawn")
        raise PRXAIError(f"the export's graph was not drawn: {error}.")


def _configure_app(app: Any, explorer: _Explorer) -> None:
    """The body limit and JSON settings of ``app``, and the engines and job runner in ``app.extensions``."""
    app.config["MAX_CONTENT_LENGTH"] = 256 * 1024
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["prxai_explorer"] = explorer.engine
    app.extensions["prxai_explorer_jobs"] = explorer.runner
    app.extensions["prxai_explorer_engines"] = explorer.engines


def _register_error_handlers(app: Any) -> None:
    """Errors as ``{"error": ...}``: :class:`PRXAIError` (400 / 413 / 422 or its own status), HTTP errors, 500."""
    from flask import jsonify, request
    from werkzeug.exceptions import HTTPException

    @app.errorhandler(PRXAIError)
    def _prxai_error(err: PRXAIError):
        status = getattr(err, "status", None)
        if status is None:
            status = 413 if isinstance(err, InputTooLong) else 422 if isinstance(err, TooCostly) else 400
        body = dict(error=str(err), **getattr(err, "extra", {}))
        return jsonify(body), status

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException):
        code = err.code or 500
        if code == 404:
            message = f"not found: {request.path}"
        elif code == 405:
            message = f"{request.method} is not allowed on {request.path}"
        elif code == 413:
            message = f"the request is larger than {app.config['MAX_CONTENT_LENGTH'] // 1024} KB."
        else:
            message = err.description or err.name
        resp = jsonify(error=message)
        resp.status_code = code
        if code == 413:  # the rest of the body was not read: the connection cannot be reused
            resp.headers["Connection"] = "close"
        return resp

    @app.errorhandler(Exception)
    def _internal(err: Exception):
        logger.exception("explorer: internal error on %s %s", request.method, request.path)
        return jsonify(error="internal error; the details are in the explorer's log."), 500


def _register_request_guards(app: Any, explorer: _Explorer) -> None:
    """The ``Host`` and cross-origin checks before each request, and the security headers after it."""
    from flask import jsonify, request

    hosts = explorer.hosts

    @app.before_request
    def _check_host():
        if hosts is not None:
            host = (request.host or "").lower()
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in hosts and host not in hosts:
                return jsonify(error=f"host {host[:80]!r} is not allowed; open the explorer at "
                                     "http://127.0.0.1:<port>/."), 403
        if request.method not in ("GET", "HEAD", "OPTIONS") or request.path.startswith("/api/"):
            # reads too: a foreign page must not make the explorer predict a dataset (CPU) or read results
            origin = request.headers.get("Origin")
            source = origin if origin is not None else request.headers.get("Referer")
            if source is not None:
                parts = urlsplit(source)
                if (parts.netloc or "").lower() != (request.host or "").lower():
                    return jsonify(error=f"cross-origin request from {source[:80]!r} refused; use the explorer's "
                                         "own page."), 403
            site = request.headers.get("Sec-Fetch-Site", "").lower()
            if site in ("cross-site", "same-site"):
                return jsonify(error=f"cross-origin request ({site}) refused; use the explorer's own page."), 403
        return None

    @app.after_request
    def _headers(resp: Any):
        from flask import g

        new = g.get("prxai_new_session")
        if new is not None or (request.path == "/" and not request.cookies.get(SESSION_COOKIE)):
            resp.set_cookie(SESSION_COOKIE, new or uuid.uuid4().hex, httponly=True, samesite="Strict", path="/")
        csp = _CSP
        if request.path == "/" and _ipv6_loopback(request.headers.get("Referer", "")):
            # a notebook at http://[::1]:port embeds the page; CSP cannot name an IPv6 address, so the page it
            # frames (the browser sets the Referer) goes without frame-ancestors
            csp = _CSP.rsplit("; frame-ancestors", 1)[0]
        resp.headers.setdefault("Content-Security-Policy", csp)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "same-origin"
        resp.headers.setdefault("Cache-Control", "no-store")
        return resp


def _register_page_routes(app: Any) -> None:
    """``/``, the page's script and style under ``/static/``, ``/prx-style.css`` and ``/favicon.ico``."""
    from flask import Response, jsonify

    @app.get("/")
    def index():
        return Response(_static("index.html"), mimetype="text/html")

    @app.get("/static/<path:name>")
    def static_file(name: str):
        if name not in STATIC_FILES or name == "index.html":
            return jsonify(error=f"not found: /static/{name[:80]}"), 404
        return Response(_static(name), content_type=STATIC_FILES[name])

    @app.get("/prx-style.css")
    def prx_style():
        from captum_prxai.viz.html import STYLE

        return Response(STYLE, content_type="text/css; charset=utf-8")

    @app.get("/favicon.ico")
    def favicon():
        return Response(b"", status=204)


def _register_data_routes(app: Any, ex: _Explorer) -> None:
    """``/api/info``, ``/api/datasets/<name>``, ``/api/examples`` and ``/api/stats``."""
    from flask import jsonify, request

    @app.get("/api/info")
    def info():
        engine, registered = ex.engine, ex.registered
        return jsonify(
            models=[{"name": n, "model_class": type(e.model).__name__, "label_names": e.label_names,
                     "max_tokens": e.max_tokens} for n, e in ex.engines.items()],
            model=ex.model_name, model_class=type(ex.model).__name__, label_names=engine.label_names,
            datasets=ex.store.names, dataset=ex.dataset, split=ex.store.split,
            methods=list(registered.values()), default_methods=ex.defaults,
            default_method=engine.default_pr_method(), featured=featured_methods(registered),
            family_names={f: _FAMILY_NAMES.get(f, f) for f in dict.fromkeys(m["family"] for m in registered.values())},
            params=param_specs(), graph_methods=[m["name"] for m in registered.values() if m["family"] == "pr-xai"],
            palettes=list(PALETTES), scales=list(SCALES),
            limits={"max_chars": engine.max_chars, "max_tokens": engine.max_tokens, "max_methods": MAX_METHODS,
                    "max_method_seconds": engine.max_method_seconds, "confirm_seconds": engine.confirm_seconds,
                    "memory_budget_mb": round(engine.memory_budget / 2 ** 20, 1)},
        )

    @app.get("/api/datasets/<name>")
    def dataset_summary(name: str):
        ds = ex.store.get(name)
        counts = [0] * len(ds.label_names)
        for lab in ds.labels:
            counts[int(lab)] += 1
        _, eng, _ = ex.pick(request.args)
        return jsonify(name=name, size=len(ds.texts), label_names=[str(n) for n in ds.label_names],
                       label_counts=counts, comparable=eng.labels_comparable(name))

    @app.get("/api/examples")
    def examples():
        arg_int = ex.arg_int
        name = request.args.get("dataset") or ex.dataset
        correct_arg = request.args.get("correct", "")
        if correct_arg not in ("", "correct", "wrong"):
            raise PRXAIError(f"'correct' must be 'correct', 'wrong' or empty, got {correct_arg[:20]!r}.")
        correct = None if correct_arg == "" else correct_arg == "correct"
        q = request.args.get("q", "")
        if len(q) > 200:
            raise InputTooLong(f"the search text has {len(q)} characters; at most 200.")
        budget = arg_int("budget", 256) or 256
        _, eng, _ = ex.pick(request.args)
        return jsonify(eng.list_examples(
            name, query=q, label=arg_int("label"), predicted=arg_int("predicted"), correct=correct,
            start=arg_int("start", 0) or 0, limit=arg_int("limit", 20) or 20, budget=min(max(budget, 1), 1024),
        ))

    @app.get("/api/stats")
    def stats():
        name_, eng, run = ex.pick(request.args)
        return jsonify(dict(eng.stats(), model=name_, queued=run.queued(),
                            running=[m for _, m in run.running()]))


def _register_explain_routes(app: Any, ex: _Explorer) -> None:
    """``/api/estimate``, ``/api/explain`` and the job routes ``/api/jobs/<id>`` and ``/api/jobs/<id>/cancel``."""
    from flask import jsonify, request

    @app.post("/api/estimate")
    def estimate():
        data = ex.payload()
        _, eng, _ = ex.pick(data)
        params, methods, _, _, enc = ex.parse_request(eng, data)
        target = ex.resolve_target(data, eng.predict(enc))
        ests = ex.estimates_of(eng, enc, target, methods, params)
        limit = eng.max_method_seconds * ESTIMATE_HEADROOM
        for e in ests:  # the page's maximum for this text: the largest setting that is never refused
            largest = eng.largest_setting(enc, e["method"], params, limit)
            e["largest"] = None if largest is None else {"param": largest[0], "value": largest[1]}
        return jsonify(estimates=ests, seconds=sum(e["seconds"] for e in ests), n_tokens=len(enc.tokens))

    @app.post("/api/explain")
    def explain():
        data = ex.payload()
        job, ests = ex.start_job(data, _session())
        body = ex.job_json(job, *ex.display_options(data, job))
        body["estimates"] = ests
        return jsonify(body), 200 if job.status == "done" else 202

    @app.get("/api/jobs/<job_id>")
    def job_status(job_id: str):
        job = ex.find_job(job_id, _session())
        return jsonify(ex.job_json(job, *ex.display_options(request.args, job, query=True)))

    @app.post("/api/jobs/<job_id>/cancel")
    def job_cancel(job_id: str):
        job = ex.find_job(job_id, _session())
        ex.runners[job.payload["model"]].cancel(job)
        return jsonify(ex.job_json(job))


def _register_graph_routes(app: Any, ex: _Explorer) -> None:
    """``/api/graph`` (the graph PageRank ran on, as SVG) and ``/api/export`` (a standalone HTML download)."""
    from flask import jsonify

    @app.post("/api/graph")
    def graph():
        data = ex.payload()
        name_, eng, run = ex.pick(data)
        params = check_params(data.get("params"))
        ex.graph_request(eng, data, params)  # bad options are refused before the input is read
        confirmed = check_flag(data, "confirmed")
        text, source, enc = ex.resolve_input(eng, data)
        owner = _session()
        run.check_quota(owner)
        probs = eng.predict(enc)
        target = ex.resolve_target(data, probs)
        echo = {k: data[k] for k in ("truncate", "text", "example") if k in data}
        echo["target"] = data.get("target")
        job = ex.start_graph_job(name_, data, params, enc, target, ex.input_info(eng, text, source, enc, probs, target),
                                 owner, confirmed, echo)
        return jsonify(ex.job_json(job)), 200 if job.status == "done" else 202

    @app.post("/api/export")
    def export():
        data = ex.payload()
        merge, palette, scale, share = ex.display_options(data)
        graph_spec = data.get("graph")
        if isinstance(graph_spec, str):
            graph_spec = {"method": graph_spec}
        if graph_spec is not None and not isinstance(graph_spec, dict):
            raise PRXAIError("'graph' must be null or {\"method\", \"top_edges\", \"nodes\", \"layout\", \"walk\"}.")
        owner = _session()
        if data.get("job") is not None:  # exactly what the page shows: the jobs' finished results
            ids = data["job"] if isinstance(data["job"], list) else [data["job"]]
            if not ids or len(ids) > len(ex.engines) or not all(isinstance(i, str) for i in ids):
                raise PRXAIError(f"'job' must be a job id, or a list of 1 to {len(ex.engines)} job ids "
                                 "(one per model shown).")
            jobs = [ex.find_job(i, owner) for i in ids]
            if any(j.payload.get("kind") == "graph" for j in jobs):
                raise PRXAIError("'job' takes the explain jobs' ids; the graph is asked for with 'graph'.")
        else:  # an explain body: run as this client's job, under the same limits, lanes and cancel as /api/explain
            if graph_spec:  # a bad graph request is refused before the explain job runs
                ex.graph_request(ex.pick(data)[1], graph_spec, check_params(data.get("params")))
            job, _ = ex.start_job(data, owner)
            jobs = [ex.await_job(job, "export's job")]
        if not any(j.results for j in jobs):
            raise PRXAIError("no method of this job has finished yet; nothing to export.")
        drawn = None
        if graph_spec:  # a graph job of this client too: the same limits, lanes and cancel
            drawn = ex.export_graph(jobs[0], graph_spec, owner, check_flag(data, "confirmed"))
        page = ex.export_page(jobs, merge, palette, scale, share, drawn)
        return _html_download(page, jobs[0].payload["input"]["text"], "prxai", "text")


def create_app(
    model: Any,
    tokenizer: Any,
    datasets: Optional[Mapping[str, Any]] = None,
    *,
    dataset: Optional[str] = None,
    split: str = "test",
    model_name: str = "model",
    max_chars: int = 2000,
    cache_size: int = 2048,
    allowed_hosts: Optional[Iterable[str]] = LOOPBACK_HOSTS,
    default_methods: Optional[Sequence[str]] = None,
    memory_budget_mb: float = 1024.0,
    max_method_seconds: float = 300.0,
    confirm_seconds: float = 20.0,
    forward_func: Optional[Any] = None,
    compare: Optional[Mapping[str, Tuple[Any, Any]]] = None,
):
    """Build the explorer's Flask application.

    Args:
        model: A Hugging Face sequence classifier (eager attention), or any
            model whose attention layers :func:`captum_prxai.attention_layers`
            finds, with ``forward_func``.
        tokenizer: Its tokenizer.
        datasets: ``name -> dataset``: objects with ``texts``, ``labels``,
            ``label_names`` (e.g. :class:`captum_prxai.data.TextDataset`), a
            pandas DataFrame with ``text`` and ``label`` columns, or a list of
            ``(text, label)`` pairs (see :func:`~captum_prxai.explorer.engine.as_dataset`);
            default: the offline datasets of :mod:`captum_prxai.data`, loaded on first use.
        dataset: Dataset shown first (default: the first one).
        split: Split of the offline datasets (ignored with ``datasets``).
        model_name: Shown in the page.
        max_chars: Longest typed text accepted, in characters.
        cache_size: Attributions kept in memory.
        allowed_hosts: Accepted ``Host`` header names (port ignored);
            ``None`` accepts any (for a server bound to a public interface).
        default_methods: Methods ticked when the page opens; default: the
            registry's PR-XAI method with :class:`~captum_prxai.PageRankAttribution`'s
            default edges, and Integrated Gradients.
        memory_budget_mb: Activation memory one method may use; sets the
            internal batch size of IG and the perturbation methods.
        max_method_seconds: Methods estimated to take longer are refused (422).
        confirm_seconds: Jobs estimated to take longer need ``"confirmed": true`` (409 first).
        forward_func: ``forward_func(model, input_ids, attention_mask) -> logits``
            for a model that is not a Hugging Face classifier (it gets the
            model copy of the thread that calls it).
        compare: More models to explain the same texts beside the first one:
            ``{"name": (model, tokenizer)}`` (e.g. a fine-tuned model and its
            base, or MiniLM and MPNet). Each has its own engine, lanes and
            cache; requests choose one with ``"model": name`` (default: the
            first, ``model_name``).

    Returns:
        A :class:`flask.Flask` application; its (first model's) engine is
        ``app.extensions["prxai_explorer"]``, every engine by model name
        ``app.extensions["prxai_explorer_engines"]``.
    """
    from flask import Flask

    store = DatasetStore(datasets, split=split)
    if not store.names:
        raise PRXAIError("no dataset given; pass at least one dataset to the explorer.")
    if dataset is None:
        dataset = store.names[0]
    elif dataset not in store.names:
        raise PRXAIError(f"unknown dataset {dataset!r}; choose one of: {', '.join(store.names)}.")
    explorer = _Explorer(
        model, tokenizer, store, dataset, model_name=model_name, max_chars=max_chars, cache_size=cache_size,
        allowed_hosts=allowed_hosts, default_methods=default_methods, memory_budget_mb=memory_budget_mb,
        max_method_seconds=max_method_seconds, confirm_seconds=confirm_seconds, forward_func=forward_func,
        compare=compare,
    )
    app = Flask(__name__, static_folder=None)
    _configure_app(app, explorer)
    _register_error_handlers(app)
    _register_request_guards(app, explorer)
    _register_page_routes(app)
    _register_data_routes(app, explorer)
    _register_explain_routes(app, explorer)
    _register_graph_routes(app, explorer)
    return app
