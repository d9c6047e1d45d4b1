"""Which pretraining heads a model class carries, and whether they came trained with its weights: said once.

A class whose heads may be missing from a checkpoint (BertForPreTraining, RobertaForMaskedLM, ALBERT's and
ELECTRA's pretraining classes…) mixes in `PretrainingHeads` before its family's base and names its heads in
`PRETRAINING_HEADS`. The loader sets `has_pretraining_heads = False` when the weights were a bare encoder's (the
heads' outputs then mean nothing, and they are not saved); the pretraining Trainer sets it back to True. What the
analyses and views ask, each `has_*_head`, follows from the two.
"""

from __future__ import annotations

from typing import ClassVar

HEAD_KINDS = ("mlm", "nsp", "sop", "rtd")  # masked LM, next sentence, sentence order, replaced-token detection


class ModelHeads:
    """Every model's answers, from its class: a bare encoder or a task model names no pretraining heads."""

    PRETRAINING_HEADS: ClassVar[frozenset[str]] = frozenset()  # a subset of HEAD_KINDS

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        unknown = set(cls.PRETRAINING_HEADS) - set(HEAD_KINDS)
        if unknown:
            raise TypeError(f"{cls.__name__}.PRETRAINING_HEADS names {sorted(unknown)}; the kinds are {HEAD_KINDS}")

    @property
    def has_pretraining_heads(self) -> bool:
        """Whether this class's own pretraining head(s) came trained with its weights: the flag the loader sets
        (False for a bare encoder loaded into a class that can lack its heads; then they are not saved) and the
        pretraining Trainer sets back to True. A task model carries its own head instead, so it answers False.

        It is not the question "what can this model predict?": analyses and views ask the `has_*_head` below.
        ALBERT's sentence-order head is not an NSP head: its has_nsp_head is False."""
        return False

    @property
    def _heads_trained(self) -> bool:
        return True  # a class whose heads cannot be missing from its checkpoint

    @property
    def trained_heads(self) -> frozenset[str]:
        """The pretraining heads it carries trained (a subset of HEAD_KINDS): empty for a bare encoder, a task model
        or a class loaded without its heads."""
        return frozenset(self.PRETRAINING_HEADS) if self._heads_trained else frozenset()

    @property
    def has_mlm_head(self) -> bool:
        """A trained masked-LM head (`mlm_logits`)."""
        return "mlm" in self.PRETRAINING_HEADS and self._heads_trained

    @property
    def has_nsp_head(self) -> bool:
        """A trained next-sentence head (`cls.seq_relationship` on the pooled [CLS] vector)."""
        return "nsp" in self.PRETRAINING_HEADS and self._heads_trained

    @property
    def has_sop_head(self) -> bool:
        """A trained sentence-order head (ALBERT's `sop_classifier`, read with `sentence_order_logits`)."""
        return "sop" in self.PRETRAINING_HEADS and self._heads_trained

    @property
    def has_replaced_token_head(self) -> bool:
        """A trained replaced-token discriminator (ELECTRA's `replaced_token_logits`)."""
        return "rtd" in self.PRETRAINING_HEADS and self._heads_trained


class PretrainingHeads(ModelHeads):
    """A class whose heads may be missing from a checkpoint: the flag is settable, and every answer follows it."""

    _has_pretraining_heads = True  # until the loader finds the checkpoint without them

    @property
    def has_pretraining_heads(self) -> bool:
        return self._has_pretraining_heads

    @has_pretraining_heads.setter
    def has_pretraining_heads(self, value: bool) -> None:
        self._has_pretraining_heads = bool(value)

    @property
    def _heads_trained(self) -> bool:
        return self._has_pretraining_heads
