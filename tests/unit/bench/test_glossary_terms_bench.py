"""bench.glossary_terms: both ways of finding a stored glossary's terms run against a real
SQLite store, agree, and the report comes out (speed is measured, not asserted)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.glossary_terms import measure, write

pytestmark = pytest.mark.unit


async def test_the_report_comes_out_with_a_row_per_case(tmp_path: Path) -> None:
    ns = argparse.Namespace(entries=[50, 200], chars=[300], repeat=2)
    result = await measure(ns)
    write(tmp_path, result)
    cases = json.loads((tmp_path / "glossary_terms.json").read_text())["cases"]
    assert [(c["entries"], c["chars"]) for c in cases] == [(50, 300), (200, 300)]
    assert all(c["terms_found"] > 0 and c["old_over_new"] > 0 for c in cases)
    assert (tmp_path / "glossary_terms.png").stat().st_size > 10_000
    assert (tmp_path / "glossary_terms.md").read_text().count("\n") == 4
