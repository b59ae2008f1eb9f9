"""Hostile cases for the end-to-end tier, the same in every run whatever ran before.

Hypothesis draws some values from the constants in the source of every local module that has
been imported (``hypothesis.internal.conjecture.providers._get_local_constants``), and caches
them by the constraints of the first draw. So the "derandomized" cases drawn inside the pytest
process depended on which tests had run first: after the API's unit tier one case had a query
string of 16,420 bytes, which HAProxy (``tune.bufsize`` 16 KiB) refused with its own HTML 400,
and the test, which wants every error in its API's JSON shape, failed; alone, it passed.

``generate`` draws the cases in a fresh interpreter (``python -m tests.e2e.hostile_cases``)
that imports only ``tests.hostile``, from a fixed seed, so they depend on this code only; and
every case's URL fits in ``MAX_URL``, well inside the request head HAProxy accepts (a head
over its buffer gets HAProxy's own HTML 400: docs/hostile-input.md). Ray's proxy, the replicas
and the app are what the tier tests, not HAProxy's buffer.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests import hostile

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261206
# The longest path and query string a case may have: HAProxy reads a request head into one
# buffer of 16 KiB (less 1 KiB it keeps for rewrites); 8 KiB leaves room for the headers.
MAX_URL = 8192

Request = tuple[int, tuple[hostile.Route, ...], bool]


def generate(
    n: int, routes: tuple[hostile.Route, ...] = hostile.ROUTES, utf8: bool = False
) -> list[hostile.Case]:
    """``n`` cases for ``routes`` (``hostile.cases``; with ``utf8``,
    ``hostile.broken_utf8_multipart``), drawn in a fresh interpreter: the same on every run."""
    request: Request = (n, routes, utf8)
    done = subprocess.run(
        [sys.executable, "-m", "tests.e2e.hostile_cases"],
        input=pickle.dumps(request),
        capture_output=True,
        cwd=ROOT,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"drawing hostile cases failed: {done.stderr.decode()[-2000:]}")
    cases: list[hostile.Case] = pickle.loads(done.stdout)
    return cases


def draw(n: int, routes: tuple[hostile.Route, ...], utf8: bool) -> list[hostile.Case]:
    """``n`` cases drawn here, from ``SEED``, each with a URL of at most ``MAX_URL``."""
    strategy = hostile.broken_utf8_multipart(routes) if utf8 else hostile.cases(routes)
    out: list[hostile.Case] = []

    @seed(SEED)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy.filter(lambda c: len(c.url.encode()) <= MAX_URL))
    def collect(case: hostile.Case) -> None:
        out.append(case)

    collect()
    return out


def _main() -> None:
    n, routes, utf8 = pickle.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(pickle.dumps(draw(n, routes, utf8)))


if __name__ == "__main__":
    _main()
