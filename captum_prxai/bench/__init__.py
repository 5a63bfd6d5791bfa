"""Faithfulness benchmark of attribution methods (PR-XAI, attention baselines, Captum).

Example::

    from captum_prxai.bench import run_benchmark
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_default

    model, tokenizer = load_default()
    result = run_benchmark(model, tokenizer, load_dataset("movie-sentences", "test"),
                           ["pr-ag", "ig", "random"], n=100, out_dir="bench-movies")
    print(result.files["markdown"].read_text())

The same from the shell: ``captum-prxai benchmark --dataset movie-sentences
--methods pr-ag,ig,random --n 100 --out bench-movies``.

The method registry is :mod:`captum_prxai.methods` (re-exported here).
"""

from captum_prxai.methods import (
    METHODS,
    Explainer,
    MethodContext,
    MethodSpec,
    available_methods,
    build_method,
    make_forward_func,
    parse_methods,
    register_method,
    register_precomputed,
    resolve_method,
)
from captum_prxai.bench.runner import BenchmarkConfig, BenchmarkResult, run_benchmark, select_examples
from captum_prxai.bench.settings import MetricSettings

__all__ = [
    "METHODS",
    "BenchmarkConfig",
    "BenchmarkResult",
    "Explainer",
    "MethodContext",
    "MethodSpec",
    "MetricSettings",
    "available_methods",
    "build_method",
    "make_forward_func",
    "parse_methods",
    "register_method",
    "register_precomputed",
    "resolve_method",
    "run_benchmark",
    "select_examples",
]
