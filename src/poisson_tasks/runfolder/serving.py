"""The serving record: what the runner's preflight recorded about the server (run.json's `serving`,
and a session's own when it was served otherwise), typed once here for every reader.

Each fact the preflight writes (runner/provenance.py) is a field of the type it is written as, so a
reader takes `record.stack` as a string or None and never checks it again; a value of another type
refuses the folder as damaged. Two rules keep old folders' bytes: a field is written back only
when the folder (or the preflight) gave it, `null` included (a server that reported no context
window has no key, a plan with no revision has `"revision": null`), and a key this version does
not know is kept and written back as it was read (`extra="allow"`: the record itself carries it,
so there is no second, raw copy of the serving to drift from the typed one).
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    model_serializer,
)

MAX_CONTEXT_WINDOW = 2**31  # the largest context window a record holds (servingpin.context_window)


class ServingRecord(BaseModel):
    """What the endpoint said about itself at a session's preflight, as recorded.

    provider, base_url, model and revision are the plan's; the rest is measured where the server
    exposes it: the serving stack and its version, the model root vLLM serves, the context window,
    the weights' revision as checked against the declared one, the quantisation, the serving
    flags, the GPU (a sidecar file), llama.cpp's facts (local.facts.LlamaCppFacts, validated by the
    card that prints them), whether the reference server ran in-process, and every raw answer
    under `details`. `kind` is read from folders that declared it (calibration/provenance.py)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    provider: StrictStr | None = None
    base_url: StrictStr | None = None
    model: StrictStr | None = None
    revision: StrictStr | None = None
    kind: StrictStr | None = None
    stack: StrictStr | None = None
    stack_version: StrictStr | None = None
    served_root: StrictStr | None = None
    context_window: StrictInt | None = Field(default=None, gt=0, le=MAX_CONTEXT_WINDOW)
    weights_revision: StrictStr | None = None
    quantization: StrictStr | None = None
    flags: list[StrictStr] | None = None
    gpu: StrictStr | None = None
    llamacpp: dict[str, Any] | None = None
    in_process: StrictBool | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Only the keys the folder or the preflight gave (an unset default is not written)."""
        out: dict[str, Any] = handler(self)
        given = self.model_fields_set | set(self.__pydantic_extra__ or ())
        return {key: value for key, value in out.items() if key in given}
