"""Dataset-scale attribution: a corpus in, a table of token scores out.

Example::

    from captum_prxai.corpus import attribute_dataset, read_results
    run = attribute_dataset("tickets.csv", "scores/", text_column="body", id_column="ticket_id",
                            methods="pr-g,pr-a")
    print(run.summary())

    import pandas as pd
    table = pd.read_parquet("scores/")          # one row per text

The same call runs in process (``engine="local"``) or on Ray Data
(``engine="ray"``, ``pip install 'captum-prxai[ray]'``), with the same output.
See ``docs/dataset.md``.
"""

from captum_prxai.corpus.io import Corpus, read_corpus, read_metadata, read_results, score_column
from captum_prxai.corpus.runner import ENGINES, DatasetRun, attribute_dataset, plan_shards
from captum_prxai.corpus.worker import LONG_POLICIES, SKIP_REASONS, Worker, plan_batches

__all__ = [
    "ENGINES",
    "LONG_POLICIES",
    "SKIP_REASONS",
    "Corpus",
    "DatasetRun",
    "Worker",
    "attribute_dataset",
    "plan_batches",
    "plan_shards",
    "read_corpus",
    "read_metadata",
    "read_results",
    "score_column",
]
