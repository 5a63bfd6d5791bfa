"""The explorer's web application (Flask): JSON API plus a small static front end.

Endpoints (all JSON unless noted; errors are ``{"error": "..."}`` with a 4xx status):

* ``GET /`` -- the page; ``GET /static/app.js``, ``/static/style.css`` -- its
  script and style (fixed names inside the package; nothing else is served);
  ``GET /prx-style.css`` -- the heatmap CSS of :mod:`captum_prxai.viz.html`.
* ``GET /api/info`` -- model, classes, datasets, methods, parameters, limits.
* ``GET /api/examples?dataset=&q=&label=&predicted=&correct=&start=&limit=``
  -- one page of filtered examples, with (cached) predictions.
* ``POST /api/explain`` -- ``{"text" | "example": {"dataset", "index"},
  "methods": [...], "params": {...}, "target", "truncate", "merge_subwords"}``;
  returns the prediction at once and a job whose methods run in the
  background; ``GET /api/jobs/<id>`` polls it.
* ``POST /api/graph`` -- the same input plus ``"method"`` (``pr-a``, ``pr-g``,
  ``pr-ag``), ``"top_edges"``, ``"layout"``: the token graph as SVG.
* ``POST /api/export`` -- the same input (plus ``"graph"``: a PR method to
  draw): a standalone HTML comparison page, as a download. Built in memory.
* ``GET /api/stats`` -- cache counters.

The server never reads or writes a path taken from a request.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from captum_prxai.exceptions import PRXAIError
from captum_prxai.explorer.engine import DatasetStore, Encoded, Engine, InputTooLong
from captum_prxai.explorer.jobs import Job, JobRunner
from captum_prxai.explorer.params import check_params, param_specs

__all__ = ["create_app", "LOOPBACK_HOSTS", "STATIC_FILES"]

#: Host names accepted by default (guards a loopback server against DNS rebinding).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
#: The only files served from the package's static folder: URL name -> content type.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
MAX_METHODS = 16
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class _HTTPError(PRXAIError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _static(name: str) -> bytes:
    return (resources.files("captum_prxai.explorer") / "static" / name).read_bytes()


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
    default_methods: Tuple[str, ...] = ("pr-ag", "ig"),
):
    """Build the explorer's Flask application.

    Args:
        model: A Hugging Face sequence classifier (eager attention).
        tokenizer: Its tokenizer.
        datasets: ``name -> dataset`` (objects with ``texts``, ``labels``,
            ``label_names``, e.g. :class:`captum_prxai.data.TextDataset`);
            default: the offline datasets of :mod:`captum_prxai.data`,
            loaded on first use.
        dataset: Dataset shown first (default: the first one).
        split: Split of the offline datasets (ignored with ``datasets``).
        model_name: Shown in the page.
        max_chars: Longest text accepted, in characters.
        cache_size: Attributions kept in memory.
        allowed_hosts: Accepted ``Host`` header names (port ignored);
            ``None`` accepts any (for a server bound to a public interface).
        default_methods: Methods ticked when the page opens.

    Returns:
        A :class:`flask.Flask` application; its engine is
        ``app.extensions["prxai_explorer"]``.
    """
    from flask import Flask, Response, jsonify, request

    store = DatasetStore(datasets, split=split)
    if not store.names:
        raise PRXAIError("no dataset given; pass at least one dataset to the explorer.")
    if dataset is None:
        dataset = store.names[0]
    elif dataset not in store.names:
        raise PRXAIError(f"unknown dataset {dataset!r}; choose one of: {', '.join(store.names)}.")
    engine = Engine(model, tokenizer, store, max_chars=max_chars, cache_size=cache_size)
    hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

    def run_method(job: Job, name: str) -> Dict[str, Any]:
        return engine.explain(job.payload["enc"], job.payload["target"], name, job.payload["params"])

    runner = JobRunner(run_method)

    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = 256 * 1024
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["prxai_explorer"] = engine
    app.extensions["prxai_explorer_jobs"] = runner

    # ------------------------------------------------------------------ plumbing
    @app.errorhandler(PRXAIError)
    def _prxai_error(err: PRXAIError):
        status = getattr(err, "status", 413 if isinstance(err, InputTooLong) else 400)
        return jsonify(error=str(err)), status

    @app.errorhandler(404)
    def _not_found(err: Any):
        return jsonify(error=f"not found: {request.path}"), 404

    @app.errorhandler(405)
    def _bad_method(err: Any):
        return jsonify(error=f"{request.method} is not allowed on {request.path}"), 405

    @app.errorhandler(413)
    def _too_large(err: Any):
        return jsonify(error=f"the request is larger than {app.config['MAX_CONTENT_LENGTH'] // 1024} KB."), 413

    @app.errorhandler(500)
    def _internal(err: Any):
        original = getattr(err, "original_exception", None) or err
        return jsonify(error=f"internal error: {type(original).__name__}: {original}"), 500

    @app.before_request
    def _check_host():
        if hosts is None:
            return None
        host = (request.host or "").lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in hosts and host not in hosts:
            return jsonify(error=f"host {host!r} is not allowed; open the explorer at http://127.0.0.1:<port>/."), 403
        return None

    @app.after_request
    def _headers(resp: Any):
        resp.headers.setdefault("Content-Security-Policy", _CSP)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers.setdefault("Cache-Control", "no-store")
        return resp

    def payload() -> Dict[str, Any]:
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise _HTTPError(400, "send a JSON object with the header Content-Type: application/json.")
        return data

    def arg_int(name: str, default: Optional[int] = None) -> Optional[int]:
        raw = request.args.get(name, "")
        if raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise PRXAIError(f"query parameter {name!r} must be an integer, got {raw!r}.") from None

    def resolve_input(data: Mapping[str, Any]) -> Tuple[str, Dict[str, Any], Encoded]:
        truncate = bool(data.get("truncate", False))
        if data.get("example") is not None:
            ex = data["example"]
            if not isinstance(ex, dict) or not isinstance(ex.get("index"), int) or isinstance(ex.get("index"), bool):
                raise PRXAIError("'example' must be {\"dataset\": name, \"index\": integer}.")
            name = str(ex.get("dataset") or dataset)
            ds = store.get(name)
            index = ex["index"]
            if not 0 <= index < len(ds.texts):
                raise PRXAIError(f"example {index} is out of range: {name} has {len(ds.texts)} examples.")
            text = ds.texts[index]
            label = int(ds.labels[index])
            source: Dict[str, Any] = {"kind": "example", "dataset": name, "index": index, "label": label,
                                      "label_name": str(ds.label_names[label])}
        else:
            text = engine.check_text(data.get("text"))
            source = {"kind": "text"}
        return text, source, engine.encode(text, truncate=truncate)

    def resolve_target(data: Mapping[str, Any], probs: List[float]) -> int:
        target = data.get("target")
        predicted = max(range(len(probs)), key=probs.__getitem__)
        if target is None or target == "":
            return predicted
        if isinstance(target, bool) or not isinstance(target, int):
            raise PRXAIError(f"'target' must be a class index (integer) or null, got {target!r}.")
        if not 0 <= target < len(probs):
            raise PRXAIError(f"target {target} is out of range: the model has classes 0..{len(probs) - 1}.")
        return target

    def resolve_methods(data: Mapping[str, Any], params: Mapping[str, Any]) -> List[str]:
        methods = data.get("methods")
        if isinstance(methods, str):
            methods = methods.split(",")
        if not isinstance(methods, list) or not methods:
            raise PRXAIError("pick at least one method ('methods': [\"pr-ag\", \"ig\"]).")
        names: List[str] = []
        for raw in methods:
            spec, _, _ = engine.method_key(raw, params)  # validates name and parameters
            if spec.name not in names:
                names.append(spec.name)
        if len(names) > MAX_METHODS:
            raise PRXAIError(f"at most {MAX_METHODS} methods at once; got {len(names)}.")
        return names

    def input_info(text: str, source: Dict[str, Any], enc: Encoded, probs: List[float], target: int) -> Dict[str, Any]:
        predicted = max(range(len(probs)), key=probs.__getitem__)
        return {"text": text, "source": source, "tokens": enc.tokens, "n_tokens": len(enc.tokens),
                "truncated": enc.truncated, "full_length": enc.full_length, "label_names": engine.label_names,
                "probabilities": probs, "predicted": predicted, "predicted_name": engine.label_names[predicted],
                "target": target, "target_name": engine.label_names[target]}

    def job_json(job: Job) -> Dict[str, Any]:
        from captum_prxai.viz.html import token_heatmap_html

        snap = job.snapshot()
        info = job.payload["input"]
        merge = job.payload["merge"]
        for result in snap["results"]:
            result["html"] = token_heatmap_html(info["tokens"], result["scores"], method=result["label"],
                                                seconds=result["seconds"], merge_subwords=merge)
        snap["input"] = info
        snap["current_label"] = engine.resolve(snap["current"]).label if snap["current"] else None
        return snap

    # ------------------------------------------------------------------ pages
    @app.get("/")
    def index():
        return Response(_static("index.html"), mimetype="text/html")

    @app.get("/static/<path:name>")
    def static_file(name: str):
        if name not in STATIC_FILES or name == "index.html":
            return jsonify(error=f"not found: /static/{name}"), 404
        return Response(_static(name), content_type=STATIC_FILES[name])

    @app.get("/prx-style.css")
    def prx_style():
        from captum_prxai.viz.html import STYLE

        return Response(STYLE, content_type="text/css; charset=utf-8")

    @app.get("/favicon.ico")
    def favicon():
        return Response(b"", status=204)

    # ------------------------------------------------------------------ API
    @app.get("/api/info")
    def info():
        return jsonify(
            model=model_name, model_class=type(model).__name__, label_names=engine.label_names,
            datasets=store.names, dataset=dataset, split=store.split,
            methods=engine.methods(), default_methods=[m for m in default_methods if m in
                                                       {x["name"] for x in engine.methods()}],
            params=param_specs(), graph_methods=["pr-ag", "pr-a", "pr-g"],
            limits={"max_chars": engine.max_chars, "max_tokens": engine.max_tokens, "max_methods": MAX_METHODS},
        )

    @app.get("/api/datasets/<name>")
    def dataset_summary(name: str):
        ds = store.get(name)
        counts = [0] * len(ds.label_names)
        for lab in ds.labels:
            counts[int(lab)] += 1
        return jsonify(name=name, size=len(ds.texts), label_names=[str(n) for n in ds.label_names],
                       label_counts=counts, comparable=engine.labels_comparable(name))

    @app.get("/api/examples")
    def examples():
        name = request.args.get("dataset") or dataset
        correct_arg = request.args.get("correct", "")
        if correct_arg not in ("", "correct", "wrong"):
            raise PRXAIError(f"'correct' must be 'correct', 'wrong' or empty, got {correct_arg!r}.")
        correct = None if correct_arg == "" else correct_arg == "correct"
        q = request.args.get("q", "")
        if len(q) > 200:
            raise InputTooLong(f"the search text has {len(q)} characters; at most 200.")
        return jsonify(engine.list_examples(
            name, query=q, label=arg_int("label"), predicted=arg_int("predicted"), correct=correct,
            start=arg_int("start", 0) or 0, limit=arg_int("limit", 20) or 20,
        ))

    @app.post("/api/explain")
    def explain():
        data = payload()
        params = check_params(data.get("params"))
        methods = resolve_methods(data, params)
        text, source, enc = resolve_input(data)
        probs = engine.predict(enc)
        target = resolve_target(data, probs)
        job = Job(methods, {"enc": enc, "target": target, "params": params,
                            "merge": bool(data.get("merge_subwords", False)),
                            "input": input_info(text, source, enc, probs, target)})
        for name in methods:  # cached results are there at once
            if engine.cached(enc, target, name, params) is not None:
                job.record(name, engine.explain(enc, target, name, params))
        runner.submit(job)
        return jsonify(job_json(job)), 200 if job.status == "done" else 202

    @app.get("/api/jobs/<job_id>")
    def job_status(job_id: str):
        if not re.fullmatch(r"[0-9a-f]{32}", job_id):
            raise _HTTPError(404, f"no job {job_id!r}.")
        job = runner.get(job_id)
        if job is None:
            raise _HTTPError(404, f"no job {job_id!r}; it may have expired, explain again.")
        return jsonify(job_json(job))

    @app.post("/api/graph")
    def graph():
        data = payload()
        params = check_params(data.get("params"))
        method = data.get("method") or "pr-ag"
        _, _, enc = resolve_input(data)
        target = resolve_target(data, engine.predict(enc))
        top = data.get("top_edges", 30)
        if isinstance(top, bool) or not isinstance(top, int):
            raise PRXAIError(f"'top_edges' must be an integer, got {top!r}.")
        return jsonify(engine.graph_svg(enc, target, method, params, top_edges=top,
                                        layout=str(data.get("layout") or "line")))

    @app.post("/api/export")
    def export():
        from captum_prxai.viz.html import comparison_page

        data = payload()
        params = check_params(data.get("params"))
        methods = resolve_methods(data, params)
        text, source, enc = resolve_input(data)
        probs = engine.predict(enc)
        target = resolve_target(data, probs)
        results = [engine.explain(enc, target, name, params) for name in methods]
        extra = None
        if data.get("graph"):
            drawn = engine.graph_svg(enc, target, str(data["graph"]), params)
            extra = f"<h2>{drawn['label']} graph</h2>{drawn['svg']}"
        labels = engine.label_names
        predicted = max(range(len(probs)), key=probs.__getitem__)
        described = ", ".join(f"{r['label']} ({', '.join(f'{k}={v}' for k, v in r['params'].items())})"
                              if r["params"] else r["label"] for r in results)
        title = f"Why {labels[target]}? {text[:80]}{'...' if len(text) > 80 else ''}"
        page = comparison_page(
            enc.tokens, {r["label"]: r["scores"] for r in results}, title=title,
            predicted_label=labels[predicted], probability=probs[predicted],
            timings={r["label"]: r["seconds"] for r in results},
            merge_subwords=bool(data.get("merge_subwords", False)),
            extra_html=(extra or "") + f'<p class="prx-meta">model: {_esc(model_name)}; methods: {_esc(described)}'
            + (f"; source: {_esc(source['dataset'])} #{source['index']} (true class {_esc(source['label_name'])})"
               if source["kind"] == "example" else "") + "</p>",
        )
        slug = re.sub(r"[^a-z0-9]+", "-", text[:40].lower()).strip("-") or "text"
        resp = Response(page, content_type="text/html; charset=utf-8")
        resp.headers["Content-Disposition"] = f'attachment; filename="prxai-{slug}.html"'
        return resp

    @app.get("/api/stats")
    def stats():
        return jsonify(engine.stats())

    return app


def _esc(text: Any) -> str:
    import html

    return html.escape(str(text), quote=True)
