"""``python -m serve_app.tools.keys``: add prints only the key, which the store then knows
by digest; list and revoke; the store is found from --url, a serve config or the env."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from serve_app.store.apikeys import PREFIX, digest
from serve_app.store.sqlite import open_sqlite
from serve_app.tools.keys import run, store_config

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[3]


def keys_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "serve_app.tools.keys", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_add_prints_only_the_new_key_and_stores_its_digest(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    done = keys_command(
        "--url", url, "add", "--name", "alice", "--chars-per-month", "500",
        "--requests-per-minute", "7",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip()
    assert done.stdout == secret + "\n"
    assert secret.startswith(PREFIX)
    assert len(secret) > 40

    async def check() -> None:
        store = await open_sqlite(f"{tmp_path}/s.db")
        key = await store.find_key(digest(secret))
        await store.close()
        assert key is not None
        assert (key.name, key.chars_per_month, key.requests_per_minute) == ("alice", 500, 7)

    asyncio.run(check())
    assert secret.encode() not in (tmp_path / "s.db").read_bytes()


async def test_list_and_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    assert await run(["--url", url, "add", "--name", "bob"]) == 0
    assert await run(["--url", url, "add", "--name", "bob"]) == 1  # name taken
    assert "named 'bob' already" in capsys.readouterr().err
    assert await run(["--url", url, "revoke", "--name", "bob"]) == 0
    assert await run(["--url", url, "revoke", "--name", "bob"]) == 1
    capsys.readouterr()
    assert await run(["--url", url, "list"]) == 0
    out = capsys.readouterr().out
    assert "bob" in out
    assert "revoked" in out


async def test_negative_limits_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    assert await run(["--url", url, "add", "--name", "x", "--chars-per-month", "-1"]) == 2


def test_store_url_from_a_serve_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(
        "applications:\n- name: app\n  args:\n    store:\n      url: sqlite:////data/x.db\n"
    )
    assert store_config(None, str(config)).sqlite_path() == "/data/x.db"
    monkeypatch.setenv("SERVE_APP_STORE_URL", "postgresql://u@h:5/db")
    assert store_config(None, None).backend == "postgresql"
    assert store_config("sqlite:///rel.db", None).sqlite_path() == str(
        Path.home() / ".serve_app" / "rel.db"
    )
