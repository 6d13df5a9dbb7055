"""The installed distribution's metadata: publishable under `weft-ann` (issue 34 item 5: `weft`
on PyPI is an unrelated project), importing as `weft`."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import weft

WORKSPACE_MANIFEST = Path(__file__).resolve().parents[3] / "Cargo.toml"


def test_the_distribution_is_weft_ann_and_imports_as_weft():
    meta = metadata.metadata("weft-ann")
    assert meta["Name"] == "weft-ann"
    assert meta["Version"] == weft.__version__
    assert "weft-ann" in metadata.packages_distributions()["weft"]
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["Summary"]
    assert meta.get("License-Expression", meta.get("License")) == "MIT OR Apache-2.0"
    classifiers = meta.get_all("Classifier")
    assert "Programming Language :: Rust" in classifiers
    assert "Programming Language :: Python :: 3.9" in classifiers
    assert meta["Keywords"]
    assert "# weft for Python" in (meta.get_payload() or meta["Description"] or "")


def test_project_urls_agree_with_the_cargo_repository():
    if not WORKSPACE_MANIFEST.exists():  # pragma: no cover - tests run from a checkout
        import pytest

        pytest.skip("not run from a checkout of weft")
    text = WORKSPACE_MANIFEST.read_text()
    repository = re.search(r'^repository\s*=\s*"([^"]+)"', text, re.M).group(1)
    urls = dict(u.split(", ", 1) for u in metadata.metadata("weft-ann").get_all("Project-URL"))
    assert urls["Repository"] == repository
    assert urls["Homepage"] == repository
    assert all(u.startswith(repository) for u in urls.values()), urls
