"""How a replica chooses the method for a segment with tags (``AppConfig.markup``).

A tagged segment is translated either with placeholders the model must give back (the better
translation: the model sees the whole sentence) or structurally, its text runs between the
tags one by one (it cannot lose a tag). A model that never keeps placeholders makes the first
method cost two translations per segment; ``auto`` watches each target language's recent
outcomes (``serve_app/translation/markup/fidelity.py``) and sends tagged segments structurally
first while placeholders mostly fail, probing now and then. The defaults and why they hold
are in docs/markup.md ("Choosing the method").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MarkupMethod = Literal["auto", "placeholders", "structural"]


class MarkupConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    method: MarkupMethod = Field(
        "auto",
        description="'placeholders': always try the placeholder path first (fall back when "
        "the model loses a tag); 'structural': never (text runs one by one); 'auto': "
        "placeholders first unless they recently failed for the target language.",
    )
    window: int = Field(
        32, ge=1, le=4096, description="Recent placeholder attempts remembered per target."
    )
    min_attempts: int = Field(
        16, ge=1, description="Attempts in the window before 'auto' may switch to structural."
    )
    max_failure_rate: float = Field(
        0.8,
        gt=0,
        le=1,
        description="'auto' goes structural first when at least this share of the window's "
        "attempts lost a tag.",
    )
    probe_every: int = Field(
        16,
        ge=2,
        le=10_000,
        description="While structural first, every Nth tagged segment still tries "
        "placeholders (a probe), so the choice recovers when the model keeps them.",
    )
    max_probe_every: int = Field(
        256,
        ge=2,
        le=10_000,
        description="Each probe that loses a tag doubles the probes' interval up to this; "
        "a kept one brings it back to probe_every.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MarkupConfig:
        if self.min_attempts > self.window:
            raise ValueError("markup.min_attempts must not exceed markup.window")
        if self.max_probe_every < self.probe_every:
            raise ValueError("markup.max_probe_every must not be below markup.probe_every")
        return self
