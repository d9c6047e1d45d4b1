"""The Inspect tab's worker job, without Qt: the forward pass of one `InspectRequest` (`run_inspection`), then the
attention panel's pictures for it (`inspect_and_draw`), so that a long input costs the GUI thread only the hand-over."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from explorer.inspector.attention_images import PanelPictures, PictureSpec, draw_panel
from explorer.inspector.state import InspectRequest


def run_inspection(request: InspectRequest) -> Any:
    """The work the inspection worker does for one request (plain call; no Qt)."""
    from bertcore.analysis.inspection import inspect_encoding

    return inspect_encoding(
        request.model, request.tokenizer, request.encoding,
        masking=request.masking, top_k=request.top_k, head_mask=request.head_mask,
    )


@dataclass(frozen=True)
class InspectJob:
    """An inspection request and the pictures to draw with its result (captured in the GUI thread)."""

    request: InspectRequest
    pictures: PictureSpec


@dataclass(frozen=True, eq=False)
class InspectResult:
    inspection: Any
    pictures: PanelPictures | None  # None when drawing them failed: the panel draws them itself
    pictures_ms: float


def inspect_and_draw(job: InspectJob) -> InspectResult:
    """The inspection worker's job: the forward pass, then the attention panel's pictures."""
    inspection = run_inspection(job.request)
    started = time.perf_counter()
    try:
        pictures = draw_panel(inspection, job.pictures)
    except Exception:  # e.g. a spec from a model swapped meanwhile: the panel draws on the GUI thread instead
        pictures = None
    return InspectResult(inspection, pictures, (time.perf_counter() - started) * 1e3)
