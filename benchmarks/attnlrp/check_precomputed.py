"""Read a cell's AttnLRP scores back the way the matrix benchmark will (project venv).

Registers the scores file with ``captum_prxai.bench.register_precomputed``, rebuilds the cell's
examples exactly as ``benchmarks/matrix.py`` does (holdout half, select_examples(len, n, 0), the
benchmark's tokenisation at the cell's max_length) and asks the registered method for each input's
scores: it fails on any input the file does not cover. With ``--append`` it adds the result to the
run's summary.md.
"""
import argparse
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)

from captum_prxai.bench import register_precomputed  # noqa: E402
from captum_prxai.bench.ablation import dataset_half  # noqa: E402
from captum_prxai.bench.runner import encode_text, resolve_max_length, select_examples  # noqa: E402
from captum_prxai.data import load_dataset  # noqa: E402
from captum_prxai.methods import MethodContext, build_method, make_forward_func  # noqa: E402
from captum_prxai.models import load_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_examples import matrix_cells  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cell", required=True)
    p.add_argument("--scores", required=True)
    p.add_argument("--append", default=None, help="summary.md to add the result to")
    a = p.parse_args()

    cell = matrix_cells()[a.cell]
    n = cell.n or (100 if cell.long else 200)
    model, tok = load_model(cell.model)
    max_length = resolve_max_length(cell.max_length, model, tok)
    forward = make_forward_func(model)
    register_precomputed("attnlrp-check", a.scores, label="AttnLRP (lxt)", overwrite=True)
    explainer = build_method("attnlrp-check", model, forward, MethodContext.from_tokenizer(tok))
    ds = dataset_half(load_dataset(cell.dataset, "test"), "holdout")
    idx = select_examples(len(ds.texts), n, 0)
    nonzero = 0
    for i in idx:
        enc = encode_text(tok, ds.texts[i], max_length, torch.device("cpu"))
        with torch.no_grad():
            target = forward(enc.ids, enc.mask).argmax(dim=-1)
        scores = explainer(enc.ids, enc.mask, enc.special, target)  # raises on an input not covered
        nonzero += bool(scores.abs().sum() > 0)
    line = (f"`register_precomputed` on `scores.jsonl`, then the cell's {len(idx)} inputs as the matrix "
            f"builds them (`{cell.name}`, max_length {max_length}): all {len(idx)} found, {nonzero} with "
            f"non-zero scores (`benchmarks/attnlrp/check_precomputed.py`).")
    print(line)
    if a.append:
        with open(a.append, "a") as f:
            f.write("\n## Read back by the benchmark\n\n" + line + "\n")


if __name__ == "__main__":
    main()
