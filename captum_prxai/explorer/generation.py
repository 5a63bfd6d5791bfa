"""The explorer's generation view: a prompt, its continuation, and the token x token matrix that explains it.

``captum-prxai explore --decoder smollm2`` (or :func:`create_generation_app`)
serves a page where one types a prompt (and optionally the continuation to
explain; otherwise the model continues it greedily for ``max_new_tokens``
tokens), picks an attention-graph method of the registry, and gets the
matrix: one row per generated token, one column per prompt token. Hovering
(or focusing) a row colours the prompt by that row's scores, as in the
standalone view of ``captum-prxai explain-generation --html``.

It runs the library's code end to end: the method is built by the method
registry (:func:`captum_prxai.methods.build_method`, on the model itself) and
wrapped in :class:`captum_prxai.llm.LLMGraphAttribution`, whose
``attribute`` is the capture -> graph -> PageRank -> scores pipeline of the
CLI; the view's colours and markup come from
:func:`captum_prxai.viz.generation_html.generation_view` and
:func:`~captum_prxai.viz.generation_html.generation_view_html`, and its hover
behaviour is :data:`~captum_prxai.viz.generation_html.VIEW_SCRIPT`, served
as a file (the page's Content-Security-Policy forbids inline scripts).

Endpoints (JSON; errors are ``{"error": "..."}`` with a 4xx status, as in
:mod:`captum_prxai.explorer.app`):

* ``GET /`` -- the page; ``GET /static/generation.js``, ``/static/generation.css``,
  ``/static/style.css``, ``/static/generation-view.js``, ``/static/generation-view.css``.
* ``GET /api/generation/info`` -- model, methods, default method, limits.
* ``POST /api/generation/explain`` -- ``{"prompt", "target": str | null,
  "max_new_tokens", "method", "chat"}``: a job of the client (202) on the
  explorer's job runner, polled at ``GET /api/generation/jobs/<id>`` (its
  ``"result"`` once done, its ``"error"`` if the library refused the input)
  and cancelled at ``POST /api/generation/jobs/<id>/cancel`` (the running
  pass stops at its next model call). Jobs belong to the client's session,
  with the same quota as the classifier view's.
* ``POST /api/generation/export`` -- ``{"job": id}``: the finished result as
  the standalone page of :func:`~captum_prxai.viz.generation_html.generation_html`.

The same host, origin and body checks as the classifier view apply.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from captum_prxai.exceptions import PRXAIError
from captum_prxai.explorer.app import (ACTIVE_JOBS_PER_CLIENT, LOOPBACK_HOSTS, _Explorer, _html_download,
                                       _HTTPError, _register_error_handlers, _register_request_guards, _session,
                                       _static)
from captum_prxai.explorer.engine import MANY_PASS, InputTooLong, JobCancelled, method_signed
from captum_prxai.explorer.jobs import Job, JobRunner
from captum_prxai.explorer.params import check_flag

__all__ = ["DEFAULT_NEW_TOKENS", "MAX_NEW_TOKENS", "GenerationEngine", "create_generation_app", "generation_methods"]

#: Tokens generated when no target is given and the request names no ``max_new_tokens`` (as the CLI's default;
#: at most the engine's ``max_new_tokens``).
DEFAULT_NEW_TOKENS = 10
#: Most tokens one request may generate.
MAX_NEW_TOKENS = 64
#: The registry families whose methods are attention-graph attributions that LLMGraphAttribution wraps
#: (the flow methods, :data:`~captum_prxai.explorer.engine.MANY_PASS`, are left out).
GRAPH_FAMILIES = ("pr-xai", "attention")
#: The only files the generation page serves from the package's static folder: URL name -> content type.
STATIC_FILES = {
    "api.js": "text/javascript; charset=utf-8",
    "generation.js": "text/javascript; charset=utf-8",
    "generation.css": "text/css; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}


def generation_methods() -> List[Any]:
    """The registered methods the generation view offers: the attention-graph methods
    (:class:`~captum_prxai.methods.MethodSpec` of the families in :data:`GRAPH_FAMILIES`, flow methods left out)."""
    from captum_prxai.methods import METHODS

    return [s for s in METHODS.values() if s.family in GRAPH_FAMILIES and s.name not in MANY_PASS]


class GenerationEngine:
    """The generation view's model side: checks a request, runs :class:`~captum_prxai.llm.LLMGraphAttribution`.

    One pass runs at a time (a lock); a cancelled job stops at the model's
    next forward call, through a forward pre-hook that the pass installs on
    the model and removes when it ends.

    Args:
        model: A Hugging Face causal language model (``AutoModelForCausalLM``).
        tokenizer: Its tokenizer.
        model_name: Shown in the page and recorded in the results.
        max_chars: Longest prompt (and target) accepted, in characters.
        max_new_tokens: Most tokens one request may generate.

    Raises:
        PRXAIError: The model is not a causal language model (the library's message).
    """

    def __init__(self, model: Any, tokenizer: Any, model_name: str = "model", max_chars: int = 2000,
                 max_new_tokens: int = MAX_NEW_TOKENS) -> None:
        if int(max_chars) < 1:
            raise PRXAIError(f"max_chars must be positive, got {max_chars}.")
        if int(max_new_tokens) < 1:
            raise PRXAIError(f"max_new_tokens must be positive, got {max_new_tokens}.")
        self.model = model.eval() if hasattr(model, "eval") else model
        self.tokenizer = tokenizer
        self.model_name = str(model_name)
        self.max_chars = int(max_chars)
        self.max_new_tokens = int(max_new_tokens)
        #: tokens generated when a request names none: :data:`DEFAULT_NEW_TOKENS`, at most ``max_new_tokens``
        self.default_new_tokens = min(DEFAULT_NEW_TOKENS, self.max_new_tokens)
        self.lock = threading.Lock()
        #: seconds per model call of the finished passes (their median sizes the next estimates)
        self._call_seconds: List[float] = []
        self.attribution(self.default_method())  # a model that is not a causal LM is refused here, by the library

    # ------------------------------------------------------------------ methods
    def methods(self) -> List[Dict[str, Any]]:
        """The methods of :func:`generation_methods`, for the page."""
        return [{"name": s.name, "label": s.label, "family": s.family, "description": s.description,
                 "signed": method_signed(s)} for s in generation_methods()]

    @staticmethod
    def default_method() -> str:
        """The project's default method (:func:`captum_prxai.methods.default_method`), as the CLI's."""
        from captum_prxai.methods import default_method

        return default_method()

    def resolve(self, name: Any) -> Any:
        """The :class:`~captum_prxai.methods.MethodSpec` of a generation method (name or alias)."""
        from captum_prxai.methods import resolve_method

        if name is None:
            name = self.default_method()
        if not isinstance(name, str):
            raise PRXAIError(f"'method' must be a method name, got {str(name)[:40]!r}.")
        spec = resolve_method(name[:60])
        offered = [s.name for s in generation_methods()]
        if spec.name not in offered:
            raise PRXAIError(f"{spec.label} is not an attention-graph method, so it cannot explain generation here; "
                             f"choose one of: {', '.join(offered)}.")
        return spec

    def attribution(self, name: str) -> Any:
        """:class:`~captum_prxai.llm.LLMGraphAttribution` around the registered method ``name``, built on the model.

        The registry's factory builds the method with the model itself as its
        forward function, as Captum's LLM wrappers require.
        """
        from captum_prxai.llm import LLMGraphAttribution
        from captum_prxai.methods import MethodContext, build_method

        spec = self.resolve(name)
        explainer = build_method(spec.name, self.model, self.model, MethodContext.from_tokenizer(self.tokenizer))
        return LLMGraphAttribution(explainer.attribution, self.tokenizer, model_name=self.model_name)

    # ------------------------------------------------------------------ requests
    def check_request(self, data: Mapping[str, Any]) -> Dict[str, Any]:
        """The checked request: ``{"prompt", "target", "max_new_tokens", "method", "chat"}`` (``target`` ``None``:
        generate; ``chat``: the prompt is a user message in the tokenizer's chat template, as ``explain-generation
        --chat``).

        Raises:
            PRXAIError: An empty or non-text prompt, a blank target, a
                ``max_new_tokens`` out of range, an unknown or non-graph method, a ``chat`` that is not a boolean.
            InputTooLong: A prompt or target over ``max_chars`` (HTTP 413).
        """
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise PRXAIError("'prompt' must be the text to continue (a string).")
        if not prompt.strip():
            raise PRXAIError("The prompt is empty; type the text to continue.")
        target = data.get("target")
        if target is not None:
            if not isinstance(target, str):
                raise PRXAIError("'target' must be the continuation to explain (a string), or null to generate it.")
            if not target.strip():
                raise PRXAIError("The target is empty; leave it out (null) to generate the continuation.")
        for what, text in (("prompt", prompt), ("target", target)):
            if text is not None and len(text) > self.max_chars:
                raise InputTooLong(f"the {what} has {len(text)} characters; the explorer accepts at most "
                                   f"{self.max_chars}.")
        count = data.get("max_new_tokens")
        if count is None:
            count = self.default_new_tokens
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= self.max_new_tokens:
            raise PRXAIError(f"'max_new_tokens' must be an integer from 1 to {self.max_new_tokens}, got "
                             f"{str(count)[:30]!r}.")
        method = self.resolve(data.get("method")).name
        chat = check_flag(data, "chat")
        return {"prompt": prompt, "target": target, "max_new_tokens": count, "method": method, "chat": chat}

    @property
    def has_chat_template(self) -> bool:
        """Whether the tokenizer has a chat template (a request may then ask for ``"chat": true``)."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    def expected_calls(self, request: Mapping[str, Any]) -> int:
        """Model calls a request is expected to make: one per generated token, then the attribution's pass."""
        return (0 if request["target"] is not None else int(request["max_new_tokens"])) + 1

    def estimate_seconds(self, request: Mapping[str, Any]) -> float:
        """Seconds a request is expected to take, from the finished passes' seconds per model call (0: unknown)."""
        if not self._call_seconds:
            return 0.0
        per_call = sorted(self._call_seconds)[len(self._call_seconds) // 2]
        return per_call * self.expected_calls(request)

    # ------------------------------------------------------------------ the pass
    def explain(self, request: Mapping[str, Any], cancel: Optional[threading.Event] = None,
                progress: Optional[Callable[[int], None]] = None) -> Dict[str, Any]:
        """Explain one checked request (:meth:`check_request`) with LLMGraphAttribution.

        Args:
            request: The checked request.
            cancel: Set it to stop the pass at the model's next forward call
                (:class:`~captum_prxai.explorer.engine.JobCancelled` is raised).
            progress: Called with 1 before each model call (generation steps and the attribution's passes).

        Returns:
            ``{"method", "label", "signed", "model", "method_description", "input_tokens", "output_tokens",
            "token_attr", "output_probs", "seconds", "warnings", "html"}``: the result's tokens, its
            ``(n_out, n_in)`` scores and ``p(t_k | prompt, t_<k)``, and the view's markup
            (:func:`~captum_prxai.viz.generation_html.generation_view_html`).

        Raises:
            PRXAIError: The library refused the input (e.g. a target of special tokens only).
            JobCancelled: ``cancel`` was set.
        """
        from captum.attr import TextTokenInput

        from captum_prxai.llm import chat_input
        from captum_prxai.viz.generation_html import generation_view, generation_view_html

        spec = self.resolve(request["method"])
        gen_args = (None if request["target"] is not None
                    else {"max_new_tokens": int(request["max_new_tokens"]), "do_sample": False})
        calls = [0]

        def guard(module: Any, args: Any) -> None:
            if cancel is not None and cancel.is_set():
                raise JobCancelled("cancelled")
            calls[0] += 1
            if progress is not None:
                progress(1)

        with self.lock:
            if cancel is not None and cancel.is_set():
                raise JobCancelled("cancelled")
            llm = self.attribution(spec.name)
            prompt = request["prompt"]
            inp = (chat_input([{"role": "user", "content": prompt}], self.tokenizer) if request.get("chat")
                   else TextTokenInput(prompt, self.tokenizer))
            handle = self.model.register_forward_pre_hook(guard)
            start = time.perf_counter()
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    result = llm.attribute(inp, target=request["target"], gen_args=gen_args)
            finally:
                handle.remove()
            seconds = time.perf_counter() - start
        if calls[0]:
            self._call_seconds = (self._call_seconds + [seconds / calls[0]])[-9:]
        notes = _warning_lines(caught)
        token_attr = result.token_attr.detach().float()
        if not bool(token_attr.isfinite().all()):
            raise PRXAIError(f"{spec.label} returned NaN or infinite scores for this prompt.")
        inputs, outputs = list(result.input_tokens), list(result.output_tokens)
        view = generation_view(inputs, outputs, token_attr, method=spec.name)
        probs = [] if result.output_probs is None else [float(p) for p in result.output_probs.tolist()]
        return {"method": spec.name, "label": spec.label, "signed": view["signed"], "model": self.model_name,
                "method_description": getattr(result, "method", spec.name), "input_tokens": inputs,
                "output_tokens": outputs, "token_attr": token_attr.tolist(), "output_probs": probs,
                "seconds": seconds, "warnings": notes, "html": generation_view_html(view)}


def _warning_lines(caught: Iterable[Any]) -> List[str]:
    """The library's warnings of a pass, for the page (Captum's display-token fallbacks, which are harmless, and
    repeats left out)."""
    lines: List[str] = []
    for w in caught:
        text = str(w.message)
        if re.match(r"\(i=\d+, idx=\d+\)|Pretty tokens length", text) or text in lines:
            continue
        if issubclass(w.category, (DeprecationWarning, FutureWarning)):
            continue
        lines.append(text)
    return lines


class _Generation:
    """What the generation app serves: the engine, its job runner and the accepted hosts."""

    def __init__(self, engine: GenerationEngine, allowed_hosts: Optional[Iterable[str]]) -> None:
        self.engine = engine
        self.hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

        def run_method(job: Job, name: str) -> Dict[str, Any]:
            return engine.explain(job.payload["request"], cancel=job.cancel_event,
                                  progress=lambda n: job.add_rows(name, n))

        self.runner = JobRunner(run_method, lane_of=lambda name: "generation", cancelled=(JobCancelled,),
                                active_per_owner=ACTIVE_JOBS_PER_CLIENT)

    def start_job(self, data: Mapping[str, Any], owner: str) -> Job:
        """Check a request and submit its job for ``owner`` (429 over the client's quota)."""
        request = self.engine.check_request(data)
        self.runner.check_quota(owner)
        method = request["method"]
        job = Job([method], {"kind": "generation", "request": request, "model": self.engine.model_name},
                  estimates={method: self.engine.estimate_seconds(request)}, owner=owner,
                  expected_rows={method: self.engine.expected_calls(request)})
        return self.runner.submit(job)

    def find_job(self, job_id: str, owner: str) -> Job:
        """The generation job ``job_id`` of ``owner`` (404 for an unknown id and another client's job alike)."""
        job = self.runner.get(job_id, owner) if re.fullmatch(r"[0-9a-f]{32}", job_id) else None
        if job is None:
            raise _HTTPError(404, f"no job {job_id[:40]!r} in this page's session; it may have expired, explain again.")
        return job

    def job_json(self, job: Job) -> Dict[str, Any]:
        """The job's snapshot with its request, its ``result`` (or ``None``) and its ``error`` (or ``None``)."""
        snap = job.snapshot()
        snap["kind"] = "generation"
        snap["request"] = dict(job.payload["request"])
        snap["model"] = job.payload["model"]
        snap["result"] = snap["results"][0] if snap["results"] else None
        snap["error"] = snap["errors"][0]["error"] if snap["errors"] else None
        snap["calls"] = sum(job.rows.values())
        return snap


def _register_generation_routes(app: Any, gen: _Generation) -> None:
    """The page, its static files and the ``/api/generation/`` routes."""
    from flask import Response, jsonify

    from captum_prxai.viz import generation_html as view

    files = dict(STATIC_FILES)

    @app.get("/")
    def index():
        return Response(_static("generation.html"), mimetype="text/html")

    @app.get("/static/<path:name>")
    def static_file(name: str):
        if name == "generation-view.js":
            return Response(view.VIEW_SCRIPT, content_type="text/javascript; charset=utf-8")
        if name == "generation-view.css":
            return Response(view.VIEW_STYLE, content_type="text/css; charset=utf-8")
        if name not in files:
            return jsonify(error=f"not found: /static/{name[:80]}"), 404
        return Response(_static(name), content_type=files[name])

    @app.get("/favicon.ico")
    def favicon():
        return Response(b"", status=204)

    @app.get("/api/generation/info")
    def info():
        eng = gen.engine
        return jsonify(model=eng.model_name, model_class=type(eng.model).__name__, methods=eng.methods(),
                       default_method=eng.default_method(), chat=eng.has_chat_template,
                       limits={"max_chars": eng.max_chars, "max_new_tokens": eng.max_new_tokens,
                               "default_new_tokens": eng.default_new_tokens})

    @app.post("/api/generation/explain")
    def explain():
        job = gen.start_job(_Explorer.payload(), _session())
        return jsonify(gen.job_json(job)), 200 if job.is_final else 202

    @app.get("/api/generation/jobs/<job_id>")
    def job_status(job_id: str):
        return jsonify(gen.job_json(gen.find_job(job_id, _session())))

    @app.post("/api/generation/jobs/<job_id>/cancel")
    def job_cancel(job_id: str):
        job = gen.find_job(job_id, _session())
        gen.runner.cancel(job)
        return jsonify(gen.job_json(job))

    @app.post("/api/generation/export")
    def export():
        data = _Explorer.payload()
        job_id = data.get("job")
        if not isinstance(job_id, str):
            raise PRXAIError("'job' must be the id of a finished generation job.")
        job = gen.find_job(job_id, _session())
        if not job.results:
            raise PRXAIError("this job has no result (yet); nothing to export.")
        result = next(iter(job.results.values()))
        page = view.generation_html(result["input_tokens"], result["output_tokens"], result["token_attr"],
                                    method=result["method"], model_name=result["model"])
        return _html_download(page, job.payload["request"]["prompt"], "prxai-generation", "prompt")


def create_generation_app(
    model: Any,
    tokenizer: Any,
    *,
    model_name: str = "model",
    max_chars: int = 2000,
    max_new_tokens: int = MAX_NEW_TOKENS,
    allowed_hosts: Optional[Iterable[str]] = LOOPBACK_HOSTS,
) -> Any:
    """Build the explorer's generation view as a Flask application.

    Args:
        model: A Hugging Face causal language model (eager attention), e.g.
            ``captum_prxai.models.decoder.load_decoder("smollm2")[0]``.
        tokenizer: Its tokenizer.
        model_name: Shown in the page and recorded in the results.
        max_chars: Longest prompt or target accepted, in characters.
        max_new_tokens: Most tokens one request may generate.
        allowed_hosts: Accepted ``Host`` header names (port ignored), as for
            :func:`~captum_prxai.explorer.create_app`; ``None`` accepts any (for
            a server bound to a public interface).

    Returns:
        A :class:`flask.Flask` application; its engine is
        ``app.extensions["prxai_generation"]`` and its job runner
        ``app.extensions["prxai_generation_jobs"]``.

    Raises:
        PRXAIError: The model is not a causal language model, or a limit is not positive.
    """
    from flask import Flask

    gen = _Generation(GenerationEngine(model, tokenizer, model_name=model_name, max_chars=max_chars,
                                       max_new_tokens=max_new_tokens), allowed_hosts)
    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = 256 * 1024
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["prxai_generation"] = gen.engine
    app.extensions["prxai_generation_jobs"] = gen.runner
    _register_error_handlers(app)
    _register_request_guards(app, gen)  # type: ignore[arg-type]
    _register_generation_routes(app, gen)
    return app
