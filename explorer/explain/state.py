"""The Explain tab's state, in plain Python: which output is explained, on what input, and what came back.

A click on an output in the Inspect tab (a masked position's guess, NSP, a class, a tag, a QA start or end)
becomes `ExplainState.explain(request)`: the target and the input the model saw (masking applied). From there
three kinds of work are asked for (attribution, mixing, patching: explorer/explain/jobs.py), each a job with a
fresh id, and each job's records arrive through `arrived`. Only the newest job of a kind counts: a record of an
older one is dropped when it arrives (`arrived` says so). The corrupted copy patching needs is state too: it must
keep the clean input's token count, and `corrupted_problem` says in words when it does not.

A job is in `work` from the moment it is asked for (0 %, waiting for the thread) until it ends, so Cancel can act
at once; a job cancelled before its results came is in `stopped` (its views say so, not "Computing…"), and once a
job has sent a few records over a couple of seconds its line says how long is left (`seconds_left`).

Every mutator announces what it changed on `changed(state, what)`, `what` an `ExplainChange`; the Qt views
(explorer/explain/_qt/) subscribe and redraw from it. Nothing here imports Qt.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bertcore.data.masking import Masking
from bertcore.tokenization.pieces import readable_tokens
from bertcore.tokenization.wordpiece import Encoding
from explorer.common.events import Event
from explorer.common.message_text import format_duration
from explorer.explain.jobs import JOB_KINDS, AttributionJob, JobRecord, MixingJob, PatchingJob, method_words

DEFAULT_METHODS = ("integrated_gradients", "gradient_x_input")
DEFAULT_MIXING_METHOD = "value_norm"
DEFAULT_STEPS = 64  # integrated gradients: evaluations at most (the method stops early once it is exact enough)
WAITING_TEXT = "waiting to start…"  # a job asked for, before its thread has sent anything
ESTIMATE_AFTER_RECORDS = 3  # records after a job's first before its time left is given ...
ESTIMATE_AFTER_S = 2.0  # ... and seconds after it: a quick job never shows a jittering estimate


class ExplainChange(str, enum.Enum):
    """What one `ExplainState.changed` announcement is about."""

    MODEL = "model"  # another model (or none): the target, the results and the corrupted input were reset
    TARGET = "target"  # another output or input to explain: the results of the previous one were cleared
    METHODS = "methods"  # the attribution methods chosen
    ATTRIBUTIONS = "attributions"  # an attribution or its faithfulness arrived (`attributions`, `faithfulness`)
    MIXING_METHOD = "mixing_method"
    MIXING = "mixing"  # context mixing arrived (`mixing`, `attention`)
    LAYER = "layer"  # the layer the mixing view shows
    CORRUPTED = "corrupted"  # the corrupted input was edited: `corrupted` or `corrupted_problem`
    PATCHING = "patching"  # a patching result arrived (`patching`)
    PATCH_LAYER = "patch_layer"  # the layer whose heads the patching view details
    WORK = "work"  # a job started, moved on, or ended (`work_line()`)
    MESSAGE = "message"  # `message` changed: what went wrong, in words (or "" when it is gone)


@dataclass(frozen=True)
class ExplainRequest:
    """What a click on an output hands over: the output and the input it was computed on."""

    target: tuple | None  # ("mlm", position, token_id), ("nsp", label), … (bertcore.explain.targets); None: the
    # input's context mixing alone (a bare encoder such as MiniLM has no output to explain)
    encoding: Encoding  # the encoding as typed
    masking: Masking | None = None  # the masking the model saw it with
    text_a: str = ""
    text_b: str | None = None


@dataclass
class Pace:
    """How fast one job moves: its first record after the start (time, fraction), its newest, and how many came."""

    first_time: float
    first_fraction: float
    time: float
    fraction: float
    records: int = 1

    def seconds_left(self) -> float | None:
        """The rest of the job at the pace since its first record; None until that pace is known (a few records
        over a couple of seconds) or while nothing moves."""
        elapsed, moved = self.time - self.first_time, self.fraction - self.first_fraction
        if self.records <= ESTIMATE_AFTER_RECORDS or elapsed < ESTIMATE_AFTER_S or moved <= 0:
            return None
        return max(0.0, 1.0 - self.fraction) * elapsed / moved


def model_input(encoding: Encoding, masking: Masking | None) -> Encoding:
    """The encoding as the model saw it: the masked ids and tokens in place of the typed ones."""
    if masking is None:
        return encoding
    return dataclasses.replace(encoding, input_ids=list(masking.masked_ids), tokens=list(masking.masked_tokens))


# ---------------------------------------------------------------- the state


@dataclass
class ExplainState:
    model: Any = None
    tokenizer: Any = None
    model_name: str = ""  # the loaded model as the window names it ("all-MiniLM-L6-v2", "mood/final")
    request: ExplainRequest | None = None
    encoding: Encoding | None = None  # the input as the model saw it (masking applied)
    target: tuple | None = None
    target_text: str = ""  # the target in words, e.g. "MLM at 4: 'paris'"
    methods: tuple[str, ...] = DEFAULT_METHODS
    steps: int = DEFAULT_STEPS
    attributions: dict[str, Any] = field(default_factory=dict)  # method → bertcore.explain Attribution
    faithfulness: dict[str, Any] = field(default_factory=dict)  # method → Faithfulness
    mixing_method: str = DEFAULT_MIXING_METHOD
    mixing: Any = None  # ContextMixing of `mixing_method`
    attention: Any = None  # ContextMixing of "attention" (raw attention and attention rollout)
    layer: int = 0  # the layer the mixing view shows, 0-based (the last one for a new model); people read layer + 1
    corrupted_text: tuple[str, str | None] | None = None  # sentence A and B of the corrupted copy
    corrupted: Encoding | None = None  # its encoding as the model sees it; None while it cannot be patched
    corrupted_problem: str = ""  # why `corrupted` is None, in words
    corrupted_over_masking: tuple[int, ...] = ()  # positions masked in the clean input that the edit changed
    patching: dict[str, Any] = field(default_factory=dict)  # "residual" / "heads" → Patching
    patch_layer: int | None = None  # the layer whose heads the patching view details
    work: dict[str, tuple[float, str]] = field(default_factory=dict)  # kind → (fraction, text) of jobs asked for
    stopped: set[str] = field(default_factory=set)  # kinds cancelled before their results came
    message: str = ""
    changed: Event = field(default_factory=Event, repr=False, compare=False)  # (state, ExplainChange)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)  # seconds, for the pace
    _pace: dict[str, Pace] = field(default_factory=dict, repr=False)  # kind → how fast its job moves
    _latest: dict[str, int] = field(default_factory=dict, repr=False)  # kind → id of its newest job
    _next_id: int = field(default=0, repr=False)

    # -- model and target ---------------------------------------------------------------------------------

    def set_model(self, model: Any, tokenizer: Any, name: str = "") -> None:
        """Another model (`MODEL`): what was explained belonged to the old one; jobs in flight become stale.
        `name`: the model as the window names it (explorer.inspector.model_info.ModelInfo.name)."""
        self.model, self.tokenizer, self.model_name = model, tokenizer, name
        self.request = self.encoding = self.target = self.corrupted_text = self.corrupted = None
        self.target_text = self.corrupted_problem = ""
        self._clear_results()
        self.patching = {}
        self.layer, self.patch_layer = max(0, self.num_layers - 1), None  # the last: rollout through every layer
        self.stopped = set()
        self._supersede_all()
        self._announce(ExplainChange.MODEL)
        self.set_message("")

    def explain(self, request: ExplainRequest) -> bool:
        """Explain `request.target` on its input (`TARGET`); False, with `message` saying why, when the model
        cannot (no model, a target its heads do not have, a position outside the input). The corrupted copy
        starts as the clean input, unless the user's edit still fits the new input."""
        if self.model is None:
            self.set_message("No model is loaded yet: open one from the Model menu, then click an output in the "
                             "Inspect tab.")
            return False
        from bertcore.explain.targets import check_target, describe_target

        encoding = model_input(request.encoding, request.masking)
        target = None
        if request.target is not None:
            try:
                target = check_target(self.model, encoding, tuple(request.target))
            except ValueError as error:
                self.set_message(f"Cannot explain {request.target!r}: {error}")
                return False
        same_input = self.encoding is not None and self.encoding.input_ids == encoding.input_ids \
            and self.encoding.segment_ids == encoding.segment_ids
        self.request, self.encoding, self.target = request, encoding, target
        self.target_text = describe_target(target, self.tokenizer, self.model) if target is not None else ""
        self._clear_results(keep_mixing=same_input)
        self.layer = min(self.layer, int(self.model.config.num_hidden_layers) - 1)
        self._announce(ExplainChange.TARGET)
        self.set_message("")
        if not same_input or self.corrupted_text is None:
            self.set_corrupted(request.text_a, request.text_b)
        else:
            self.set_corrupted(*self.corrupted_text)
        return True

    def _clear_results(self, keep_mixing: bool = False) -> None:
        self.attributions, self.faithfulness = {}, {}
        if not keep_mixing:
            self.mixing = self.attention = None
        self.patching = {}
        self.patch_layer = None

    # -- choices --------------------------------------------------------------------------------------------

    def set_methods(self, methods) -> None:
        """The attribution methods to show side by side (`METHODS`); at least one, each a known method."""
        from bertcore.explain.attribution import ATTRIBUTION_METHODS

        methods = tuple(dict.fromkeys(methods))
        unknown = [method for method in methods if method not in ATTRIBUTION_METHODS]
        if unknown or not methods:
            raise ValueError(f"attribution methods {list(methods)}: choose one or more of "
                             f"{', '.join(ATTRIBUTION_METHODS)}")
        if methods != self.methods:
            self.methods = methods
            self._announce(ExplainChange.METHODS)

    def set_mixing_method(self, method: str) -> None:
        from bertcore.explain.mixing import MIXING_METHODS

        if method not in MIXING_METHODS:
            raise ValueError(f"context mixing method {method!r}: choose one of {', '.join(MIXING_METHODS)}")
        if method != self.mixing_method:
            self.mixing_method, self.mixing = method, None
            self._announce(ExplainChange.MIXING_METHOD)

    def set_layer(self, layer: int) -> None:
        layers = self.num_layers
        if not 0 <= layer < max(1, layers):
            raise ValueError(f"layer {layer} is outside the model's layers 0..{layers - 1}")
        if layer != self.layer:
            self.layer = int(layer)
            self._announce(ExplainChange.LAYER)

    def select_patch_layer(self, layer: int | None) -> None:
        if layer is not None and not 0 <= layer < self.num_layers:
            raise ValueError(f"layer {layer} is outside the model's layers 0..{self.num_layers - 1}")
        if layer != self.patch_layer:
            self.patch_layer = layer
            self._announce(ExplainChange.PATCH_LAYER)

    @property
    def num_layers(self) -> int:
        return 0 if self.model is None else int(self.model.config.num_hidden_layers)

    @property
    def readable_tokens(self) -> list[str]:
        """The input's pieces as the Inspect tab writes them ("·ed", not "##ed"); [] before an input."""
        return [] if self.encoding is None else readable_tokens(self.encoding)

    # -- the corrupted input ------------------------------------------------------------------------------

    def set_corrupted(self, text_a: str, text_b: str | None) -> Encoding | None:
        """Encode the corrupted copy (`CORRUPTED`). It must have the clean input's token count, position for
        position, so a patched activation lands where it came from; when it has not, `corrupted` is None and
        `corrupted_problem` says by how much it differs and what to do.

        The clean input's masking is applied wherever the copy is as typed, so an MLM target asks about the same
        [MASK] and the two runs differ only by the edit. An edit of a masked position is kept (its position is
        listed in `corrupted_over_masking`, for the tab to say): activation patching measures what the clean run's
        activations restore in a run whose input differs by the user's edit, and overwriting that edit with the
        clean masking would leave two identical runs, nothing to restore."""
        text_b = text_b if text_b is not None and text_b.strip() else None
        self.corrupted_text = (text_a, text_b)
        self.corrupted, self.corrupted_problem, self.corrupted_over_masking = None, "", ()
        self.patching, self.patch_layer = {}, None
        if self.encoding is None or self.tokenizer is None:
            self.corrupted_problem = "Click an output in the Inspect tab first: patching needs a clean input."
        else:
            try:
                maximum = int(self.model.config.max_position_embeddings)
                encoding = self.tokenizer.encode(text_a, text_b, max_length=maximum)
                if len(encoding) == self.encoding.num_tokens < len(self.encoding):  # the clean input is padded
                    encoding = self.tokenizer.encode(text_a, text_b, max_length=maximum, pad_to=len(self.encoding))
            except ValueError as error:
                self.corrupted_problem = f"The corrupted input does not encode: {error}"
            else:
                if len(encoding) != len(self.encoding) or encoding.segment_ids != self.encoding.segment_ids:
                    self.corrupted_problem = _length_problem(encoding, self.encoding)
                else:
                    request = self.request
                    if request is not None and request.masking is not None:
                        ids, typed, edited = list(encoding.input_ids), request.encoding.input_ids, []
                        for position in request.masking.positions:
                            if ids[position] == typed[position]:  # not edited: masked, as in the clean run
                                ids[position] = request.masking.masked_ids[position]
                            elif ids[position] != request.masking.masked_ids[position]:
                                edited.append(position)  # the user's edit is the corruption: it stays
                        tokens = self.tokenizer.convert_ids_to_tokens(ids)
                        encoding = dataclasses.replace(encoding, input_ids=ids, tokens=tokens)
                        self.corrupted_over_masking = tuple(sorted(edited))
                    self.corrupted = encoding
                    if encoding.input_ids == self.encoding.input_ids:
                        self.corrupted_problem = ("The corrupted input is the clean one: edit a word of A or B "
                                                  "(same number of tokens) to see what restores the output.")
        self._announce(ExplainChange.CORRUPTED)
        return self.corrupted

    # -- jobs ----------------------------------------------------------------------------------------------

    def attribution_job(self) -> AttributionJob | None:
        if self.target is None:
            return None
        return AttributionJob(self._new_id("attribution"), self.model, self.tokenizer, self.encoding, self.target,
                              self.methods, self.steps)

    def mixing_job(self) -> MixingJob | None:
        if self.encoding is None:
            return None
        return MixingJob(self._new_id("mixing"), self.model, self.tokenizer, self.encoding, self.mixing_method)

    def patching_job(self) -> PatchingJob | None:
        """None, with `message` saying why, when there is no clean target or no usable corrupted copy."""
        if self.target is None:
            self.set_message("Click an output in the Inspect tab first: patching restores one output.")
            return None
        if self.corrupted is None or self.corrupted.input_ids == self.encoding.input_ids:
            self.set_message(self.corrupted_problem or "Edit the corrupted input first.")
            return None
        return PatchingJob(self._new_id("patching"), self.model, self.tokenizer, self.encoding, self.corrupted,
                           self.target)

    def is_current(self, kind: str, request_id: int) -> bool:
        return self._latest.get(kind) == request_id

    def arrived(self, record: JobRecord) -> bool:
        """A job's record: its progress and, when it carries one, a result (announced by its kind). A record of
        a superseded job is dropped; returns whether it was taken."""
        if not self.is_current(record.kind, record.request_id):
            return False
        self.work[record.kind] = (record.fraction, record.text)
        now, pace = self.clock(), self._pace.get(record.kind)
        if pace is None:
            self._pace[record.kind] = Pace(now, record.fraction, now, record.fraction)
        else:
            pace.time, pace.fraction, pace.records = now, record.fraction, pace.records + 1
        if record.item is not None:
            what, key, value = record.item
            if what == "attribution":
                self.attributions[key] = value
                self._announce(ExplainChange.ATTRIBUTIONS)
            elif what == "faithfulness":
                self.faithfulness[key] = value
                self._announce(ExplainChange.ATTRIBUTIONS)
            elif what == "mixing":
                if key == "attention":
                    self.attention = value
                if key == self.mixing_method:
                    self.mixing = value
                self._announce(ExplainChange.MIXING)
            elif what == "patching":
                self.patching[key] = value
                self._announce(ExplainChange.PATCHING)
        self._announce(ExplainChange.WORK)
        return True

    def job_ended(self, kind: str, request_id: int, outcome: str, message: str = "") -> None:
        """A job ended: "finished", "stopped" or "failed" (`message` says why). Only the current job's end
        changes what is shown: its line leaves the status, and a failure becomes `message`."""
        if not self.is_current(kind, request_id):
            return
        self.work.pop(kind, None)
        self._pace.pop(kind, None)
        if outcome == "stopped":
            self.stopped.add(kind)
        self._announce(ExplainChange.WORK)
        if outcome == "failed":
            self.set_message(f"The {kind} could not be computed: {message}")
        elif outcome == "stopped":
            self.set_message(f"The {kind} was cancelled; what arrived before stays.")

    def cancel_all(self) -> None:
        """Every job asked for becomes stale (the tab stops them) and is `stopped`: the status line empties."""
        self.stopped |= set(self.work)
        self._supersede_all()
        self.set_message("Cancelled; what arrived before stays.")

    def computing(self, kind: str) -> bool:
        """A job of `kind` is asked for and not ended: its view says it is computing."""
        return kind in self.work

    def work_line(self) -> str:
        """The status of the jobs asked for, e.g. "attribution 40% (integrated gradients: 24 of 64 …), 0:42 left"."""
        parts = []
        for kind, (fraction, text) in self.work.items():
            if text == WAITING_TEXT:  # one job runs at a time: the others wait their turn
                parts.append(f"then {kind}" if parts else f"{kind}: starting…")
                continue
            pace = self._pace.get(kind)
            left = None if pace is None else pace.seconds_left()
            parts.append(f"{kind} {round(100 * fraction)}% ({text})" + ("" if left is None else
                                                                         f", {format_duration(left)} left"))
        return " · ".join(parts)

    def progress(self) -> float | None:
        """How far the work asked for is, as a whole (jobs run one after another: the mean of their fractions), or
        None when none is asked for."""
        return sum(fraction for fraction, _ in self.work.values()) / len(self.work) if self.work else None

    def set_message(self, text: str) -> None:
        if text != self.message:
            self.message = text
            self._announce(ExplainChange.MESSAGE)

    def _new_id(self, kind: str) -> int:
        """A job of `kind` is asked for: it is work from now on (Cancel acts on it before its thread starts)."""
        self._next_id += 1
        self._latest[kind] = self._next_id
        self.work[kind] = (0.0, WAITING_TEXT)
        self._pace.pop(kind, None)
        self.stopped.discard(kind)
        self._announce(ExplainChange.WORK)
        return self._next_id

    def _supersede_all(self) -> None:
        """Every job asked for so far is stale: its records are dropped and it leaves the status line."""
        self._next_id += 1
        self._latest = {kind: self._next_id for kind in JOB_KINDS}
        self._pace = {}
        if self.work:
            self.work = {}
            self._announce(ExplainChange.WORK)

    def _announce(self, what: ExplainChange) -> None:
        self.changed.emit(self, what)


def _length_problem(corrupted: Encoding, clean: Encoding) -> str:
    difference = len(corrupted) - len(clean)
    if difference == 0:
        return ("The corrupted input has the clean input's token count but its sentence A and B split "
                "differently: keep each sentence's length in tokens, so every position patches onto its own.")
    more = "more" if difference > 0 else "fewer"
    return (f"The corrupted input has {len(corrupted)} tokens, {abs(difference)} {more} than the clean input's "
            f"{len(clean)}: patching copies one position onto the same position, so both need the same count. "
            f"Replace a word by one that splits into as many pieces (the token rows above show the pieces).")


def mixing_share(matrix: np.ndarray) -> np.ndarray:
    """(T, T) rows rescaled to shares that sum to 1 (a row of zeros stays zero): the one scale on which raw
    attention, attention rollout and every context-mixing measure can be compared. Value norms come per head,
    (H, T, T): their heads are summed first, as the layer's output sums them."""
    matrix = np.asarray(matrix, np.float64)
    if matrix.ndim == 3:
        matrix = matrix.sum(axis=0)  # (H, T, T) -> (T, T)
    totals = matrix.sum(axis=-1, keepdims=True)
    return np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0).astype(np.float32)


def mixing_maps(mixing: Any, attention: Any, layer: int) -> list[tuple[str, str, np.ndarray]]:
    """The mixing view's four (T, T) maps at `layer` (0-based; the titles say layer + 1), as (key, title, shares):
    the chosen method at that layer and rolled out to it, then raw attention (mean over heads) and attention
    rollout. A result not there yet is left out; the chosen method being attention itself is shown once."""
    maps = []
    results = [mixing] + ([attention] if attention is not None and attention is not mixing else [])
    for result in results:
        if result is None:
            continue
        name, shown = method_words(result.method), layer + 1  # layers are read 1..L, as the Inspect tab has them
        if result.method == "attention":
            titles = (f"raw attention · layer {shown} (mean of heads)", f"attention rollout to layer {shown}")
        else:
            titles = (f"{name} · layer {shown}", f"{name} rolled out to layer {shown}")
        maps.append((f"{result.method}/layer", titles[0], mixing_share(result.per_layer[layer])))
        maps.append((f"{result.method}/rollout", titles[1], mixing_share(result.rollout[layer])))
    return maps
