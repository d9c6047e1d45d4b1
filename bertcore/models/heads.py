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


class PretrainingHeads:
    PRETRAINING_HEADS: ClassVar[frozenset[str]]  # a subset of HEAD_KINDS
    _has_pretraining_heads = True  # until the loader finds the checkpoint without them

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        unknown = set(cls.PRETRAINING_HEADS) - set(HEAD_KINDS)
        if unknown:
            raise TypeError(f"{cls.__name__}.PRETRAINING_HEADS names {sorted(unknown)}; the kinds are {HEAD_KINDS}")

    @property
    def has_pretraining_heads(self) -> bool:
        return self._has_pretraining_heads

    @has_pretraining_heads.setter
    def has_pretraining_heads(self, value: bool) -> None:
        self._has_pretraining_heads = bool(value)

    @property
    def has_mlm_head(self) -> bool:
        """A trained masked-LM head (`mlm_logits`)."""
        return "mlm" in self.PRETRAINING_HEADS and self._has_pretraining_heads

    @property
    def has_nsp_head(self) -> bool:
        """A trained next-sentence head (`cls.seq_relationship` on the pooled [CLS] vector)."""
        return "nsp" in self.PRETRAINING_HEADS and self._has_pretraining_heads

    @property
    def has_sop_head(self) -> bool:
        """A trained sentence-order head (ALBERT's `sop_classifier`); not an NSP head."""
        return "sop" in self.PRETRAINING_HEADS and self._has_pretraining_heads

    @property
    def has_replaced_token_head(self) -> bool:
        """A trained replaced-token discriminator (ELECTRA's `replaced_token_logits`)."""
        return "rtd" in self.PRETRAINING_HEADS and self._has_pretraining_heads
