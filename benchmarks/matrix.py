"""The faithfulness matrix: datasets x architectures x methods, on the held-out half of each test split.

Each cell is one :func:`captum_prxai.bench.run_benchmark` run written to
``benchmarks/results/matrix/<cell>/`` (resumable: rerun the same command to
continue or extend it). ``--summary`` collects every finished cell into
``benchmarks/results/matrix.md``: comprehensiveness, sufficiency and AOPC per
method and cell, and each method's rank among the methods of its cell.

Examples come from the ``holdout`` half of the test split (see
:func:`captum_prxai.bench.ablation.dataset_half`), the half the PR-XAI
defaults were not tuned on.

    python benchmarks/matrix.py --cell minilm--movie-reviews --threads 1
    python benchmarks/matrix.py --summary

``--add METHODS`` adds methods to finished cells without rerunning the others
(``run_benchmark(merge=True)``): on the same examples, with the cell's ``n``.
``--extend`` takes a finished cell to a larger ``--n`` from its committed
``results.csv`` (``run_benchmark(reuse_results=True)``): rows whose cache key
(model weights, settings, method options) matches are kept, and only the new
examples are computed; with ``--retrained`` also the rows of a model retrained
with the same recipe whose weights differ a little, after a spot check
(``run_benchmark(reuse_retrained=True)``); ``--recompute-retrained`` does the
opposite, computing those rows again with this model so that the cell holds one
model's rows (``run_benchmark(recompute_retrained=True)``). ``--finished`` computes nothing: it
summarises the longest prefix of the sample whose examples have every method in
the cache, e.g. of a run that was stopped (``--n`` then bounds it).
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from research_methods import register_research_methods, research_default  # noqa: E402

register_research_methods()  # the research variants the tables name (idempotent)

RESULTS = Path(__file__).resolve().parent / "results"
MATRIX_DIR = RESULTS / "matrix"

#: Methods of short-text cells, and of long-text cells (attention flow and occlusion are too slow at 512 tokens).
SHORT_METHODS = ("pr-tag,pr-tag-pm,pr-tag-pm0.25,pr-g,pr-ag,pr-a,gae,rollout,raw-attention,attention-flow,ig,ixg,"
                 "saliency,occlusion,random")
LONG_METHODS = "pr-tag,pr-tag-pm,pr-tag-pm0.25,pr-g,pr-ag,gae,rollout,ig,random"
#: Methods of the MPNet and SmolLM2 long cells (fewer, for CPU time).
FEW_LONG_METHODS = "pr-tag,pr-tag-pm,pr-tag-pm0.25,pr-g,pr-ag,gae,ig,random"
#: Added to the MPNet cells: the defaults of encoders of 12 or more layers, the seventh round's two walks at γ = 0.25,
#: the ninth round's gate on them, the eleventh round's hubs' weight, the thirteenth round's log-probability and the
#: seventeenth round's conservative pass, alone and with the relevance weight (the current default)
DEEP = (",pr-tag0.25-pm0.25,pr-tag0.25-pm0.25-gate0.5,pr-tag0.25-pm0.25-gate0.5-hubs0.5"
        ",pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp,pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp"
        ",pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel")
#: Added to the MiniLM cells: the defaults of encoders under 12 layers since the eleventh round (each walk weighed by
#: its graph's hubs), the thirteenth (on the class's log-probability) and the seventeenth (the conservative pass,
#: alone and with the relevance weight); the 12-layer ones are the last of DEEP
SHALLOW = ",pr-tag-pm0.25-hubs0.5,pr-tag-pm0.25-hubs0.5-lp,pr-tag-pm0.25-hubs0.5-lp-cp,pr-tag-pm0.25-hubs0.5-lp-cp-rel"
#: Added to the decoder cells: the decoders' default since the fourteenth round, PR-TAG± on the class's
#: log-probability
CAUSAL = ",pr-tag-pm-lp"


@dataclass(frozen=True)
class Cell:
    architecture: str
    dataset: str
    model: str
    long: bool = False
    #: the cell's methods (default: SHORT_METHODS or LONG_METHODS) and number of examples (200 short, 100 long)
    methods: Optional[str] = None
    n: Optional[int] = None
    #: methods whose scores were computed elsewhere: (name, label, JSON Lines file under results/)
    precomputed: Tuple[Tuple[str, str, str], ...] = ()
    #: wordpiece budget of the benchmark (default: the model's limit, 512)
    max_length: Optional[int] = None
    #: IG's interpolation steps per pass (default: all 50 at once); the same scores, less memory
    ig_batch: Optional[int] = None

    @property
    def name(self) -> str:
        return f"{self.architecture}--{self.dataset}"

    @property
    def default(self) -> str:
        """The library's default method for the cell's architecture (the research variant equal to
        ``recommended_spec`` for its attention type and depth)."""
        return research_default(causal=self.architecture in DECODERS, depth=DEPTHS[self.architecture])

    def shown_default(self) -> Tuple[str, str]:
        """The default whose rows the summaries show, and a note: the cell's default, or where its rows are not in
        the cell's ``results.csv`` yet (a default changed since the cell ran, on a model that could not be
        reproduced to add it), the former default of its architecture, said so."""
        csv_file = MATRIX_DIR / self.name / "results.csv"
        if csv_file.is_file() and self.default != FORMER_DEFAULT.get(self.architecture, self.default):
            with csv_file.open(newline="", encoding="utf-8") as fh:
                if not any(row["method"] == self.default for row in csv.DictReader(fh)):
                    return FORMER_DEFAULT[self.architecture], "former default"
        return self.default, ""


#: architectures whose attention is causal (decoder-only)
DECODERS = ("smollm2",)
#: attention layers of each architecture (the default's γ depends on an encoder's depth)
DEPTHS = {"minilm": 6, "mpnet": 12, "smollm2": 30}
#: the default of each architecture before its last change (on encoders, the thirteenth round's, before the
#: seventeenth round's conservative pass; on decoders, before the fourteenth round's log-probability): shown, and said
#: to be, where a cell has no rows of the current default
FORMER_DEFAULT = {"mpnet": "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp", "minilm": "pr-tag-pm0.25-hubs0.5-lp",
                  "smollm2": "pr-tag-pm"}


CELLS: Dict[str, Cell] = {c.name: c for c in [
    # AttnLRP runs in its own environment (lxt needs transformers 4.x): see benchmarks/attnlrp/README.md;
    # lxt 2.1 has no MPNet file, so benchmarks/attnlrp/mpnet_rules.py applies its rules to MPNet (same label)
    Cell("minilm", "movie-sentences", "default", methods=SHORT_METHODS + ",kernel-shap,lime" + SHALLOW,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-minilm-movie-sentences/scores.jsonl"),)),
    Cell("minilm", "uncertainty", "minilm-uncertainty", methods=SHORT_METHODS + SHALLOW,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-minilm-uncertainty/scores.jsonl"),)),
    Cell("minilm", "tweets", "minilm-tweets", methods=SHORT_METHODS + SHALLOW,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-minilm-tweets/scores.jsonl"),)),
    Cell("minilm", "movie-reviews", "minilm-movie-reviews", long=True, methods=LONG_METHODS + SHALLOW,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-minilm-movie-reviews/scores.jsonl"),)),
    Cell("minilm", "bbc-news", "minilm-bbc-news", long=True, methods=LONG_METHODS + SHALLOW,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-minilm-bbc-news/scores.jsonl"),)),
    # MPNet is ~8x MiniLM's cost per pass: fewer methods and examples on this CPU
    Cell("mpnet", "movie-sentences", "mpnet-movie-sentences", methods=LONG_METHODS + DEEP,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-mpnet-movie-sentences/scores.jsonl"),)),
    Cell("mpnet", "uncertainty", "mpnet-uncertainty", methods=LONG_METHODS + DEEP,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-mpnet-uncertainty/scores.jsonl"),)),
    Cell("mpnet", "tweets", "mpnet-tweets", methods=LONG_METHODS + ",kernel-shap,lime" + DEEP,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-mpnet-tweets/scores.jsonl"),)),
    # trained and benchmarked at 256 wordpieces (a 512-token MPNet pass is ~8x MiniLM's on this CPU)
    Cell("mpnet", "movie-reviews", "mpnet-movie-reviews", long=True, methods=FEW_LONG_METHODS + DEEP, n=100,
         max_length=256,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-mpnet-movie-reviews/scores.jsonl"),)),
    Cell("mpnet", "bbc-news", "mpnet-bbc-news", long=True, methods=FEW_LONG_METHODS + DEEP, n=100,
         max_length=256,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-mpnet-bbc-news/scores.jsonl"),)),
    # decoder-only: SmolLM2-135M fine-tuned with a classification head on the last token (see models.md);
    # its long cells run at 256 tokens and 30 examples, for CPU time, and IG 10 steps per pass (all 50 steps
    # of a 256-token input at once took more than this 24 GB machine)
    Cell("smollm2", "movie-sentences", "smollm2-movie-sentences", methods=LONG_METHODS + CAUSAL,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-smollm2-movie-sentences/scores.jsonl"),)),
    Cell("smollm2", "uncertainty", "smollm2-uncertainty", methods=LONG_METHODS + CAUSAL,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-smollm2-uncertainty/scores.jsonl"),)),
    Cell("smollm2", "tweets", "smollm2-tweets", methods=LONG_METHODS + ",kernel-shap,lime" + CAUSAL, n=200,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-smollm2-tweets/scores.jsonl"),)),
    Cell("smollm2", "movie-reviews", "smollm2-movie-reviews", long=True, methods=FEW_LONG_METHODS + CAUSAL,
         n=100, max_length=256, ig_batch=10,
         precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-smollm2-movie-reviews/scores.jsonl"),)),
    Cell("smollm2", "bbc-news", "smollm2-bbc-news", long=True, methods=FEW_LONG_METHODS + CAUSAL, n=100,
         max_length=256, ig_batch=10, precomputed=(("attnlrp", "AttnLRP (lxt)", "attnlrp-smollm2-bbc-news/scores.jsonl"),)),
]}


def _register_precomputed(cells: Sequence[Cell], labels_only: bool = False) -> None:
    """Register the cells' externally computed methods: for running them, or (``labels_only``) for their labels,
    where scores not computed yet are left out."""
    from captum_prxai.bench import register_precomputed

    for cell in cells:
        for name, label, scores in cell.precomputed:
            if labels_only and not (RESULTS / scores).is_file():
                continue
            register_precomputed(name, RESULTS / scores, label=label, overwrite=True)


def run_cell(cell: Cell, n: Optional[int], methods: Optional[str], argv: Sequence[str], add: bool = False,
             extend: bool = False, finished: bool = False, retrained: bool = False,
             recompute_retrained: bool = False) -> Path:
    """Run one cell (``add``: only ``methods``, merged into the cell's finished run; ``extend``: reuse the rows of
    its ``results.csv`` that this run would compute; ``finished``: compute nothing, summarise the examples whose
    every method is done; see the module docstring)."""
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.bench.runner import run_benchmark, write_command
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_model

    model, tokenizer = load_model(cell.model)
    dataset = dataset_half(load_dataset(cell.dataset, "test"), "holdout")
    out = MATRIX_DIR / cell.name
    _register_precomputed([cell])
    extra = "" if add else "".join(f",{name}" for name, _, _ in cell.precomputed)
    default_methods = cell.methods or (LONG_METHODS if cell.long else SHORT_METHODS)
    result = run_benchmark(model, tokenizer, dataset, (methods or default_methods) + extra,
                  n=n or cell.n or (100 if cell.long else 200), out_dir=out, model_name=cell.model,
                  max_length=cell.max_length, merge=add, reuse_results=extend, finished_only=finished,
                  reuse_retrained=retrained, recompute_retrained=recompute_retrained,
                  method_options={"ig": {"internal_batch_size": cell.ig_batch}} if cell.ig_batch else None)
    if finished:  # the command that computes what was summarised: this n, computed (or resumed) in full
        argv = _with_n([a for a in argv if a != "--finished"], result.meta["n_examples"])
    write_command(out, "python benchmarks/matrix.py", argv, append=add)
    return out / "summary.md"


def _with_n(argv: Sequence[str], n: int) -> list:
    """``argv`` with ``--n`` set to ``n`` (replaced where given, else added)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--n":
            skip = True
            continue
        if not a.startswith("--n="):
            out.append(a)
    return out + ["--n", str(n)]


def _shown_cells(heading: Callable[[Cell], str]) -> List[Tuple[str, Path, str]]:
    """``(heading, folder, default)`` of every cell for the summaries: the default whose rows they show
    (:meth:`Cell.shown_default`), and the heading marked when it is the former one."""
    cells = []
    for c in CELLS.values():
        default, note = c.shown_default()
        cells.append((heading(c) + (f" ({note})" if note else ""), MATRIX_DIR / c.name, default))
    return cells


def write_bins(path: Path = RESULTS / "matrix_bins.md") -> Path:
    """``benchmarks/results/matrix_bins.md``: the default against LIG and AttnLRP at each removal bin, per cell."""
    from captum_prxai.bench.report import write_bin_breakdown

    _register_precomputed(list(CELLS.values()), labels_only=True)
    cells = _shown_cells(lambda c: f"{ARCH_NAMES[c.architecture]} · {DATA_NAMES[c.dataset]}")
    return write_bin_breakdown(cells, path, intro=(
        "From each cell's `results.csv` (`python benchmarks/matrix.py --bins`). Comprehensiveness @k% is the drop "
        "in the explained class's probability when the top-scored k% of the tokens are deleted, sufficiency @k% "
        "when only they are kept; the matrix's two metrics are the means over the five bins."))


def write_summary(path: Path = RESULTS / "matrix.md") -> Path:
    """Collect every finished cell into ``benchmarks/results/matrix.md``."""
    from captum_prxai.bench.report import write_default_check, write_matrix

    _register_precomputed(list(CELLS.values()), labels_only=True)  # so that their labels show
    cells = [(f"{c.architecture} × {c.dataset} ({'long' if c.long else 'short'})", MATRIX_DIR / c.name)
             for c in CELLS.values()]
    intro = ("Held-out half of each test split; ERASER deletion metrics, mean ± standard error over examples; "
             "rank = place among the cell's methods on comprehensiveness (1 = best, the random control unranked). "
             "Each cell's folder under [`matrix/`](matrix/) has its full table, deletion curves, per-example CSV "
             "and the exact command (`COMMAND`).")
    # the encoders' defaults, PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5, log-prob., CP x relevance) and PR-TAG±
    # (λ=0.25, hubs 0.5, log-prob., CP x relevance), and the decoders', PR-TAG± (log-prob.), against each strong rival
    # and the former default (the encoders': also the conservative pass alone, where it ran); then the former defaults
    # (the same from the model's own gradient, then on the logit, then without the hubs' weight: PR-TAG± (γ=0.25,
    # λ=0.25, gate 0.5), PR-TAG± (γ=0.25, λ=0.25), PR-TAG± (λ=0.25), PR-TAG), PR-G and PR-AG
    chain = [("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel", "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp"),
             ("pr-tag-pm0.25-hubs0.5-lp-cp-rel", "pr-tag-pm0.25-hubs0.5-lp"),
             ("pr-tag-pm0.25-hubs0.5-lp-cp-rel", "pr-tag-pm0.25-hubs0.5-lp-cp"),
             ("pr-tag-pm-lp", "pr-tag-pm"),
             ("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp", "pr-tag0.25-pm0.25-gate0.5-hubs0.5"),
             ("pr-tag-pm0.25-hubs0.5-lp", "pr-tag-pm0.25-hubs0.5"),
             ("pr-tag0.25-pm0.25-gate0.5-hubs0.5", "pr-tag0.25-pm0.25-gate0.5"),
             ("pr-tag-pm0.25-hubs0.5", "pr-tag-pm0.25")]
    hubs = list(dict.fromkeys((default, rival) for default, former in chain
                              for rival in ("gae", "ig", "attnlrp", "lime", "kernel-shap", former)))
    pairs = hubs + [("pr-tag0.25-pm0.25-gate0.5", "gae"), ("pr-tag0.25-pm0.25-gate0.5", "ig"),
             ("pr-tag0.25-pm0.25-gate0.5", "attnlrp"), ("pr-tag0.25-pm0.25-gate0.5", "lime"),
             ("pr-tag0.25-pm0.25-gate0.5", "kernel-shap"), ("pr-tag0.25-pm0.25-gate0.5", "pr-tag0.25-pm0.25"),
             ("pr-tag0.25-pm0.25-gate0.5", "pr-tag"),
             ("pr-tag0.25-pm0.25", "gae"), ("pr-tag0.25-pm0.25", "ig"), ("pr-tag0.25-pm0.25", "attnlrp"),
             ("pr-tag0.25-pm0.25", "lime"), ("pr-tag0.25-pm0.25", "kernel-shap"),
             ("pr-tag0.25-pm0.25", "pr-tag-pm0.25"), ("pr-tag0.25-pm0.25", "pr-tag"),
             ("pr-tag-pm0.25", "gae"), ("pr-tag-pm0.25", "ig"), ("pr-tag-pm0.25", "attnlrp"),
             ("pr-tag-pm0.25", "lime"), ("pr-tag-pm0.25", "kernel-shap"), ("pr-tag-pm0.25", "pr-tag"),
             ("pr-tag-pm0.25", "pr-tag-pm"),
             ("pr-tag-pm", "gae"), ("pr-tag-pm", "ig"), ("pr-tag-pm", "attnlrp"), ("pr-tag-pm", "lime"),
             ("pr-tag-pm", "kernel-shap"), ("pr-tag-pm", "pr-tag"), ("pr-tag-pm", "pr-g"),
             ("pr-tag", "gae"), ("pr-tag", "ig"), ("pr-tag", "attnlrp"), ("pr-tag", "lime"),
             ("pr-tag", "kernel-shap"), ("pr-tag", "pr-g"), ("pr-tag", "pr-ag"), ("pr-g", "gae"), ("pr-ag", "gae"),
             ("pr-g", "ig"), ("pr-ag", "ig"), ("pr-g", "attnlrp"), ("pr-ag", "attnlrp")]
    write_matrix(cells, path, intro=intro, pairs=pairs)
    write_default_check(_shown_cells(lambda c: f"{c.architecture} × {c.dataset}"),
                        RESULTS / "matrix_default.md",
                        intro="The default of each cell's architecture (`research_methods.research_default`: "
                              "PR-TAG± (λ=0.25, hubs 0.5, log-prob., CP x relevance) on encoders under 12 layers, "
                              "PR-TAG± (γ=0.25, λ=0.25, gate 0.5, hubs 0.5, log-prob., CP x relevance) on encoders of "
                              "12 or more, PR-TAG± (log-prob.) on decoders) against every other method of the cell, "
                              "from each "
                              "cell's `results.csv` (`python benchmarks/matrix.py --summary`). A cell marked 'former "
                              "default' has no rows of its current default yet and shows the one before. The goal: "
                              "first or level within one paired standard error against GAE and LIG, on both metrics.")
    return path


#: the README's names of the cells
ARCH_NAMES = {"minilm": "MiniLM", "mpnet": "MPNet", "smollm2": "SmolLM2"}
DATA_NAMES = {"movie-sentences": "sentences", "uncertainty": "uncertainty", "tweets": "tweets",
              "movie-reviews": "reviews, long", "bbc-news": "BBC News, long"}


def readme_table() -> str:
    """The README's default-in-the-matrix table: ``matrix_default.md``'s check (``default_check``) in short form,
    then the cells not run with the default yet, if any."""
    from captum_prxai.bench.report import default_check, default_row

    _register_precomputed(list(CELLS.values()), labels_only=True)
    rivals, columns = ("gae", "ig"), ("gae", "ig", "attnlrp")
    lines = ["| cell | default | n | comp. / suff. | − GAE | − LIG | − AttnLRP | goal | worst case |",
             "|---|---|---|---|---|---|---|---|---|"]
    missing = []
    for c, (heading, out, default) in zip(CELLS.values(), _shown_cells(
            lambda c: f"{ARCH_NAMES[c.architecture]} · {DATA_NAMES[c.dataset]}"
                      + (f" @{c.max_length}" if c.max_length else ""))):
        try:
            check = default_check(out / "results.csv", default, rivals)
        except (FileNotFoundError, KeyError):
            missing.append(f"{ARCH_NAMES[c.architecture]} · {DATA_NAMES[c.dataset]}")
            continue
        row = [heading]
        lines.append("| " + " | ".join(row + default_row(check, default, columns, rivals, short=True)) + " |")
    table = "\n".join(lines)
    return table + ("\n\nNot yet run with the current defaults: " + "; ".join(missing) + "." if missing else "")


FORMER_DIR = RESULTS / "matrix-former-default"


def compare_former(path: Path = FORMER_DIR / "reproduction.md") -> Path:
    """How a cell's rerun agrees with its former run (``matrix-former-default/<cell>``): per method both ran, the
    largest per-example difference of the explained class's probability and of the two metrics, on the examples
    both runs have."""
    from captum_prxai.bench.report import read_csv

    def _per_example(path: Path, metric: str) -> Dict[str, Dict[int, float]]:
        """``{method: {example: value}}`` of ``metric`` (``prob`` or a metric column) from a run's results.csv."""
        values: Dict[str, Dict[int, float]] = {}
        for record in read_csv(path):
            value = record["prob"] if metric == "prob" else record["metrics"].get(metric)
            if value is not None:
                values.setdefault(record["method"], {})[record["example"]] = value
        return values

    lines = ["# Reruns against the former runs", "",
             "Largest per-example |difference| between `matrix/<cell>/results.csv` and "
             "`matrix-former-default/<cell>/results.csv`, on the examples and methods both have "
             "(`python benchmarks/matrix.py --compare-former`).", "",
             "| cell | method | n | probability | comprehensiveness | sufficiency |", "|---|---|---|---|---|---|"]
    for former in sorted(p for p in FORMER_DIR.iterdir() if (p / "results.csv").is_file()):
        columns = [(_per_example(former / "results.csv", metric),
                    _per_example(MATRIX_DIR / former.name / "results.csv", metric))
                   for metric in ("prob", "comprehensiveness", "sufficiency")]
        for method in sorted(set(columns[0][0]) & set(columns[0][1])):
            common = sorted(set(columns[0][0][method]) & set(columns[0][1][method]))
            worst = [max(abs(old[method][e] - new[method][e]) for e in common) for old, new in columns]
            cells = [former.name, method, str(len(common))] + [f"{d:.1e}" for d in worst]
            lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], choices=sorted(CELLS), help="cell(s) to run")
    parser.add_argument("--n", type=int, default=None, help="examples (default 200 short, 100 long)")
    parser.add_argument("--methods", default=None, help="override the cell's methods")
    parser.add_argument("--add", default=None, metavar="METHODS",
                        help="add these methods to the finished cells, keeping their other rows")
    parser.add_argument("--extend", action="store_true",
                        help="take the cells to --n from their results.csv, computing only what is new")
    parser.add_argument("--finished", action="store_true",
                        help="compute nothing: summarise the longest prefix of the sample (at most --n) whose examples "
                             "have every method in the cache (with --extend, or in results.csv), e.g. of a run that "
                             "was stopped")
    parser.add_argument("--retrained", action="store_true",
                        help="with --extend: also keep the rows of a model retrained with the same recipe whose "
                             "weights are not bit-for-bit the former ones, after recomputing the first examples to "
                             "check them")
    parser.add_argument("--recompute-retrained", action="store_true",
                        help="with --extend: compute again, with this model, the rows an earlier --retrained run kept "
                             "from a former model (summary.json's reused_retrained), so the cell holds one model's "
                             "rows")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--summary", action="store_true",
                        help="write benchmarks/results/matrix.md and matrix_default.md")
    parser.add_argument("--readme-table", action="store_true", help="print the README's default-in-the-matrix table")
    parser.add_argument("--bins", action="store_true",
                        help="write benchmarks/results/matrix_bins.md: the default against LIG and AttnLRP per bin")
    parser.add_argument("--compare-former", action="store_true",
                        help="write matrix-former-default/reproduction.md: each rerun against its former run")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.cell:
        print(run_cell(CELLS[name], args.n, args.add or args.methods, argv, add=bool(args.add),
                       extend=args.extend, finished=args.finished, retrained=args.retrained,
                       recompute_retrained=args.recompute_retrained), flush=True)
    if args.summary:
        print(write_summary())
    if args.readme_table:
        print(readme_table())
    if args.bins:
        print(write_bins())
    if args.compare_former:
        print(compare_former())
    return 0


if __name__ == "__main__":
    sys.exit(main())
