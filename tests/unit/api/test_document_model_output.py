"""A document job whatever the model answers: a translation holding characters that XML
cannot (an escape, a NUL: random weights write them) is written without them, and the job
ends ``done``, not ``error`` after all its segments were translated."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docsamples import SAMPLES
from tests.unit.api.test_documents_api import finish, make


@pytest.mark.parametrize("name", ["docx", "xlsx", "xliff"])
async def test_control_characters_in_the_models_answer_do_not_fail_the_job(
    tmp_path: Path, name: str
) -> None:
    async for setup in make(tmp_path):
        engine = setup.documents.service.engine
        engine.reply = lambda prompt: "\x1b[1mOK\x00\x0b"  # type: ignore[attr-defined]
        files = {"file": (f"a.{name}", SAMPLES[name]())}
        form = {"target_lang": "de", "source_lang": "en"}
        r = await setup.client.post("/documents", files=files, data=form)
        assert r.status_code == 201, r.text
        doc = r.json()["id"]
        await finish(setup)
        status = (await setup.client.get(f"/documents/{doc}")).json()
        assert status["status"] == "done", status
        r = await setup.client.get(f"/documents/{doc}/result")
        assert r.status_code == 200
