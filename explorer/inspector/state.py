"""The explorer's session state, in plain Python: the source of truth the Qt views render.

Which model is loaded and where it came from, the sentence pair, the masking (a pretraining recipe with a
seed, or positions the user clicked), the head mask, and the last inspection. Nothing here imports Qt, so
the whole flow (type → encode → mask → request an inspection) runs and is tested headless.

Errors never leave the state half-changed: `set_pair` encodes first and commits only when that worked, so
the window keeps showing the previous input while it reports what was wrong with the new one.

Every mutator announces what it changed on `changed(state, what)`, `what` a `Change`, and only that: the Qt
views (`explorer.inspector._qt.inspect_tab`, the head lab's controller) subscribe and redraw from it, so no view
refreshes another by hand. A training snapshot shown in the tab is state too (`snapshot`): what the views show is
`shown_inspection()`, and the snapshot goes as soon as the live input, its masking or the head mask changes. Each
view of the inspection redraws from `shown_inspection()` when `SHOWN_CHANGES` announces that it may be another.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bertcore.analysis.inspection import max_input_length
from bertcore.data.masking import Masking, mask_exactly, mask_like_bert
from bertcore.data.masking_recipes import check_recipe
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from bertcore.tokenization.wordpiece import BertTokenizer, Encoding
from explorer.common.events import Event
from explorer.inspector.masking_summary import masking_line, recipe_name
from explorer.inspector.model_info import ModelInfo

DEFAULT_TOP_K = 5
TASK_WORDS = {SEQUENCE_TASK: "classification", TOKEN_TASK: "tagging", QA_TASK: "question-answering"}


class Change(str, enum.Enum):
    """What one `ExplorerState.changed` announcement is about."""

    MODEL = "model"  # another model: the snapshot, head mask, encoding, masking and inspection were reset with it
    INPUT = "input"  # the pair was encoded (and the masking re-applied to it)
    MASKING = "masking"  # the masking of the same encoding (its mode, seed or positions)
    HEAD_MASK = "head_mask"
    INSPECTION = "inspection"  # a live inspection arrived (`inspection`, with the `pictures` drawn for it)
    SNAPSHOT = "snapshot"  # a snapshot was shown, or left (`snapshot` is None again)


# After these, `shown_inspection()` may be another inspection (None after MODEL): what a view of it redraws on.
SHOWN_CHANGES = frozenset({Change.MODEL, Change.INSPECTION, Change.SNAPSHOT})


@dataclass(frozen=True)
class Snapshot:
    """An inspection computed elsewhere (a training snapshot), shown captioned instead of the live one."""

    inspection: Any
    caption: str


class MaskingMode(str, enum.Enum):
    NONE = "none"  # the model sees the sentence as typed
    BERT = "bert"  # a pretraining recipe (`masking_recipe`): 15% of the tokens, 80/10/10, reproducible from `seed`
    MANUAL = "manual"  # exactly the positions the user clicked, each replaced by [MASK]


@dataclass(frozen=True)
class InspectRequest:
    """Everything the inspection worker needs, captured at one moment; `request_id` orders requests."""

    request_id: int
    model: Any
    tokenizer: BertTokenizer
    encoding: Encoding
    masking: Masking | None
    head_mask: np.ndarray | None  # (L, H) 1 = keep, 0 = off; None = all heads on
    top_k: int = DEFAULT_TOP_K


@dataclass
class ExplorerState:
    model: Any = None
    tokenizer: BertTokenizer | None = None
    model_info: ModelInfo | None = None
    text_a: str = ""
    text_b: str | None = None
    pad_to: int | None = None  # pad the encoding to this many positions to show [PAD] and the attention mask
    masking_mode: MaskingMode = MaskingMode.NONE
    masking_recipe: str = "token"  # what "mask like BERT" picks: "token", "whole-word" or "span" (masking_recipes)
    seed: int = 0
    manual_positions: tuple[int, ...] = ()
    head_mask: np.ndarray | None = None  # (L, H) float32; None while every head is on
    top_k: int = DEFAULT_TOP_K
    encoding: Encoding | None = None  # the last pair that encoded without error
    masking: Masking | None = None  # the masking applied to `encoding`
    inspection: Any = None  # the last live inspection (bertcore.analysis.inspection.Inspection)
    pictures: Any = None  # the attention pictures the worker drew with `inspection` (attention_images.PanelPictures)
    snapshot: Snapshot | None = None  # shown instead of `inspection` until the live input changes
    masking_note: str = ""  # why the masking is gone: a fine-tuned model took over a masked input (until masked again)
    changed: Event = field(default_factory=Event, repr=False, compare=False)  # (state, Change)
    _next_request_id: int = field(default=0, repr=False)
    _shown_request_id: int = field(default=0, repr=False)  # the request whose inspection `inspection` is

    # -- model -------------------------------------------------------------------------------------------------

    def set_model(self, model: Any, tokenizer: BertTokenizer, info: ModelInfo) -> None:
        """Swap in a model (`MODEL`). The pair stays; it is re-encoded with the new vocabulary when that works
        (`INPUT`), its masking redrawn for it, except for a fine-tuned model (a task head): it was trained on text
        as typed, so the masks drawn for a masked LM are cleared and `masking_note` says so (a token masked by hand
        afterwards is the user's own question). Inspections requested for the previous model are dropped when they
        arrive."""
        self.model, self.tokenizer, self.model_info = model, tokenizer, info
        self.head_mask = None  # a head mask belongs to one architecture
        self.inspection = self.pictures = None
        self.snapshot = None
        self.encoding = None
        self.masking = None
        self.masking_note = ""
        if info.task is not None and self.masking_mode is not MaskingMode.NONE:
            self.masking_mode, self.manual_positions = MaskingMode.NONE, ()
            self.masking_note = (f"Masks cleared for {info.name}: a fine-tuned {TASK_WORDS.get(info.task, 'task')} "
                                 "model reads the input as typed.")
        self._shown_request_id = self._next_request_id
        self._announce(Change.MODEL)
        if self.text_a.strip():
            try:
                self.set_pair(self.text_a, self.text_b)
            except ValueError:
                pass  # the window re-encodes and reports the message

    @property
    def max_length(self) -> int:
        if self.model is None:
            return 512
        return max_input_length(self.model.config)

    # -- input ---------------------------------------------------------------------------------------------------

    def encode(self, text_a: str, text_b: str | None) -> Encoding:
        """Encode without changing the state; TokenizerError (a ValueError) says what is wrong."""
        if self.tokenizer is None:
            raise ValueError("no model is loaded yet; open a checkpoint or create a model from the Model menu")
        text_b = text_b if text_b is not None and text_b.strip() else None
        pad_to = None
        if self.pad_to is not None:
            pad_to = min(self.pad_to, self.max_length)
        encoding = self.tokenizer.encode(text_a, text_b, max_length=self.max_length)
        if pad_to is not None and pad_to > len(encoding):
            encoding = self.tokenizer.encode(text_a, text_b, max_length=self.max_length, pad_to=pad_to)
        return encoding

    def set_pair(self, text_a: str, text_b: str | None) -> Encoding:
        """Encode the pair and re-apply the masking (`INPUT`); on error the previous pair and encoding stay and
        nothing is announced."""
        encoding = self.encode(text_a, text_b)
        masking = self._masking_for(encoding)
        self.leave_snapshot()
        self.text_a = text_a
        self.text_b = text_b if text_b is not None and text_b.strip() else None
        self.encoding, self.masking = encoding, masking
        if self.masking_mode is MaskingMode.MANUAL:
            self.manual_positions = tuple(masking.positions) if masking is not None else ()
            if masking is None:
                self.masking_mode = MaskingMode.NONE
        self._announce(Change.INPUT)
        return encoding

    def input_notes(self) -> list[str]:
        """Warnings about the current encoding: truncation and words the vocabulary lacks."""
        if self.encoding is None:
            return []
        notes = []
        if self.encoding.truncation is not None:
            notes.append(self.encoding.truncation.message)
        if self.encoding.unknown_words:
            words = ", ".join(dict.fromkeys(repr(word) for word in self.encoding.unknown_words))
            notes.append(f"[UNK] for: {words} — the vocabulary has no pieces for these characters")
        return notes

    # -- masking ---------------------------------------------------------------------------------------------

    def mask_like_bert(self, seed: int | None = None, recipe: str | None = None) -> Masking | None:
        """A pretraining recipe (`recipe`, else the one set last) with `seed` (else the seed set last): `MASKING`."""
        if recipe is not None:
            self.masking_recipe = check_recipe(recipe)
        if seed is not None:
            self.seed = int(seed)
        self.masking_mode, self.masking_note = MaskingMode.BERT, ""
        self.leave_snapshot()
        self._remask()
        self._announce(Change.MASKING)
        return self.masking

    def set_masking_recipe(self, recipe: str) -> None:
        """The recipe the next "mask like BERT" uses; while a recipe masks the input it draws again with this one
        (`MASKING`), otherwise nothing shown changes and nothing is announced."""
        recipe = check_recipe(recipe)
        if recipe == self.masking_recipe:
            return
        self.masking_recipe = recipe
        if self.masking_mode is MaskingMode.BERT and self.encoding is not None:
            self.mask_like_bert()

    def reroll(self) -> Masking | None:
        """A new seed: the next draw of BERT's 15% / 80-10-10 recipe."""
        return self.mask_like_bert(self.seed + 1)

    def set_seed(self, seed: int) -> None:
        """The seed the next "mask like BERT" uses; while BERT's recipe masks the input it draws again with it
        (`MASKING`), otherwise nothing shown changes and nothing is announced."""
        seed = int(seed)
        if seed == self.seed:
            return
        self.seed = seed
        if self.masking_mode is MaskingMode.BERT and self.encoding is not None:
            self.mask_like_bert()

    def toggle_mask(self, position: int) -> Masking | None:
        """Mask or unmask one position by hand. ValueError for [CLS]/[SEP]/[PAD] or a position past the end."""
        if self.encoding is None:
            raise ValueError("there is no input to mask yet; type a sentence first")
        if not 0 <= position < len(self.encoding):
            raise ValueError(f"position {position} is outside the input (0..{len(self.encoding) - 1})")
        if self.encoding.special_tokens_mask[position]:
            token = self.encoding.tokens[position]
            raise ValueError(f"position {position} is {token}, a token the layout adds; BERT never masks it")
        current = set(self.masking.positions) if self.masking is not None else set()
        current ^= {position}
        if not current:
            return self.clear_masks()
        masking = mask_exactly(self.encoding, self.tokenizer, sorted(current))
        self.leave_snapshot()
        self.masking_mode, self.manual_positions, self.masking = MaskingMode.MANUAL, tuple(sorted(current)), masking
        self.masking_note = ""
        self._announce(Change.MASKING)
        return masking

    def clear_masks(self) -> None:
        """Unmask every position: `MASKING`, unless nothing was masked or chosen."""
        if self.masking_mode is MaskingMode.NONE and self.masking is None and not self.manual_positions:
            return None
        self.leave_snapshot()
        self.masking_mode, self.manual_positions, self.masking = MaskingMode.NONE, (), None
        self.masking_note = ""
        self._announce(Change.MASKING)
        return None

    def masking_summary(self) -> str:
        """The masking of what is shown in one line: how it was chosen and what became of the tokens it picked
        (a snapshot's own masking while one is shown)."""
        if self.snapshot is not None:
            shown = self.snapshot.inspection
            if shown.masking is None:
                return "No masking in the snapshot's input."
            seed = shown.masking.seed
            how = "snapshot, by hand" if seed is None else f"snapshot, {recipe_name(shown.masking)}, seed {seed}"
            return masking_line(how, shown.encoding, shown.masking)
        if self.masking is None:
            return self.masking_note or "No masking: click a token to mask it, or press “Mask like BERT”."
        how = f"{recipe_name(self.masking)}, seed {self.seed}" if self.masking_mode is MaskingMode.BERT else "by hand"
        mask_token = None if self.tokenizer is None else self.tokenizer.mask_token
        return masking_line(how, self.encoding, self.masking, mask_token)

    def _remask(self) -> Masking | None:
        self.masking = self._masking_for(self.encoding) if self.encoding is not None else None
        return self.masking

    def _masking_for(self, encoding: Encoding) -> Masking | None:
        if self.masking_mode is MaskingMode.BERT:
            return mask_like_bert(encoding, self.tokenizer, seed=self.seed, recipe=self.masking_recipe)
        if self.masking_mode is MaskingMode.MANUAL:
            # Clicked positions survive an edit when they still hold an ordinary token.
            positions = [
                position for position in self.manual_positions
                if position < len(encoding) and not encoding.special_tokens_mask[position]
                and encoding.input_ids[position] not in self.tokenizer.special_token_ids
            ]
            return mask_exactly(encoding, self.tokenizer, positions) if positions else None
        return None

    # -- heads ---------------------------------------------------------------------------------------------------

    def set_head_mask(self, head_mask: np.ndarray | None) -> bool:
        """Returns whether it changed (`HEAD_MASK` when it did). An all-ones mask is stored as None (every head
        on)."""
        if head_mask is not None:
            head_mask = np.asarray(head_mask, dtype=np.float32)
            if self.model_info is not None:
                expected = (self.model_info.num_layers, self.model_info.num_heads)
                if head_mask.shape != expected:
                    raise ValueError(f"head mask has shape {head_mask.shape}; this model needs {expected}")
            if np.all(head_mask == 1):
                head_mask = None
        unchanged = (head_mask is None and self.head_mask is None) or (
            head_mask is not None and self.head_mask is not None and np.array_equal(head_mask, self.head_mask)
        )
        if unchanged:
            return False
        self.leave_snapshot()
        self.head_mask = head_mask
        self._announce(Change.HEAD_MASK)
        return True

    def heads_on(self) -> np.ndarray | None:
        """(L, H) 1 = on, 0 = off, for the model loaded (all ones while every head is on); None without a model."""
        if self.head_mask is not None:
            return self.head_mask.copy()
        if self.model_info is None:
            return None
        return np.ones((self.model_info.num_layers, self.model_info.num_heads), np.float32)

    # -- inspection --------------------------------------------------------------------------------------------

    def inspect_request(self) -> InspectRequest | None:
        """The request for the current input, with a fresh id; None when there is nothing to inspect."""
        if self.model is None or self.encoding is None:
            return None
        self._next_request_id += 1
        return InspectRequest(
            request_id=self._next_request_id,
            model=self.model,
            tokenizer=self.tokenizer,
            encoding=self.encoding,
            masking=self.masking,
            head_mask=None if self.head_mask is None else self.head_mask.copy(),
            top_k=self.top_k,
        )

    def supersede_requests(self) -> None:
        """Make every request issued so far stale: its result will not be shown."""
        self._next_request_id += 1
        self._shown_request_id = self._next_request_id

    @property
    def latest_request_id(self) -> int:
        return self._next_request_id

    def inspection_arrived(self, request_id: int, inspection: Any, pictures: Any = None) -> bool:
        """The worker's result for `request_id`: it becomes `inspection` (`INSPECTION`), with the attention
        `pictures` the worker drew for it (None: the panel draws its own), when it is newer than the one shown,
        else it is dropped (made stale by a snapshot or a model shown since); returns whether it was taken. Every
        newer result is taken, not only the newest request's: while keys keep coming the views show the input of
        a moment ago instead of nothing."""
        if request_id <= self._shown_request_id:
            return False
        self._shown_request_id = request_id
        self.inspection, self.pictures = inspection, pictures
        self._announce(Change.INSPECTION)
        return True

    # -- a snapshot shown instead of the live inspection -----------------------------------------------------

    def show_snapshot(self, inspection: Any, caption: str) -> None:
        """Show an inspection computed elsewhere (`SNAPSHOT`); a live result still in flight will not replace it."""
        self.supersede_requests()
        self.snapshot = Snapshot(inspection, caption)
        self._announce(Change.SNAPSHOT)

    def leave_snapshot(self) -> None:
        """Back to the live inspection (`SNAPSHOT`); nothing happens while none is shown."""
        if self.snapshot is not None:
            self.snapshot = None
            self._announce(Change.SNAPSHOT)

    def shown_inspection(self) -> Any:
        """What every view of an inspection shows: the snapshot's inspection while one is shown, else the live
        one; None before the first inspection of the model loaded (a model change drops the previous one's)."""
        return self.snapshot.inspection if self.snapshot is not None else self.inspection

    def shown_pictures(self) -> Any:
        """The attention pictures drawn with the shown inspection (`pictures`, for the live one); None while a
        snapshot is shown or when the worker drew none. Each is keyed by what it was drawn for, so a view redraws
        one that no longer fits what it shows."""
        return None if self.snapshot is not None else self.pictures

    def shown_heads(self) -> tuple[bool, str | None] | None:
        """What the model behind the shown inspection has besides its encoder: (an MLM or an NSP head, the task
        kind of a fine-tuned head or None). A snapshot's own while one is shown (a pretraining run's snapshot over
        MiniLM has predictions), else the live model's; None before any model."""
        if self.snapshot is not None:
            output = self.snapshot.inspection.task_output
            return self.snapshot.inspection.has_pretraining_heads, None if output is None else output.kind
        if self.model_info is None:
            return None
        return self.model_info.has_pretraining_heads, self.model_info.task

    def shown_input(self) -> tuple[Encoding | None, Masking | None]:
        """The encoding and masking of what is shown: the snapshot's while one is, else the live input's."""
        if self.snapshot is not None:
            return self.snapshot.inspection.encoding, self.snapshot.inspection.masking
        return self.encoding, self.masking

    def _announce(self, what: Change) -> None:
        self.changed.emit(self, what)
