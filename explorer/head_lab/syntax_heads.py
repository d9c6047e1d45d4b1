"""The Head lab's syntax heads, without Qt: each head of the model in the window scored as a dependency parser
(bertcore.analysis.syntax: Clark et al. 2019's UAS per head and direction, per relation, with the offset baselines)
on a treebank, as a generator that yields after every batch, so that the app shows progress and can cancel.

    for progress in syntax_heads_run(model, tokenizer, SyntaxSettings(max_sentences=500)):
        ...                                  # progress.done of progress.total batches; progress.result at the end
    result.syntax                            # bertcore.analysis.syntax.SyntacticAttention

It runs exactly `bertcore.syntactic_attention`'s computation (the same layout, the same batches, the same scorer),
one batch at a time, holding the model in eval mode without gradients only while a batch runs: between two yields
the model is as it was found (another thread, the inspector's, uses the same model).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bertcore.analysis.syntax import DIRECTIONS, OFFSET_NAMES, BestHead, SyntacticAttention

SHIPPED_NAME = "UD English EWT (the shipped dev cut)"
DEFAULT_SENTENCES = 500  # the measure: 500 sentences, ~7,000 words scored (mini ≤ 2 s, base ≤ 20 s)
MIN_RELATION_WORDS = 20  # a relation's best head is listed once this many of its words were scored
DIRECTION_NAMES = {0: "dependent → head", 1: "head → dependent"}  # DIRECTIONS, short, as the views name them


@dataclass(frozen=True)
class SyntaxSettings:
    treebank: str | None = None  # a CoNLL-U file; None = the shipped cut of UD English EWT's dev set
    max_sentences: int = DEFAULT_SENTENCES  # its first sentences scored

    def __post_init__(self) -> None:
        if isinstance(self.max_sentences, bool) or not isinstance(self.max_sentences, int) or self.max_sentences < 1:
            raise ValueError(f"sentences is {self.max_sentences!r}; score at least 1 sentence")
        if self.treebank is not None and not str(self.treebank).strip():
            raise ValueError("no treebank file is given; type the path of a CoNLL-U file (.conllu) or pick the "
                             "shipped one")

    @property
    def source(self) -> str:
        return SHIPPED_NAME if self.treebank is None else Path(self.treebank).name


@dataclass(frozen=True)
class SyntaxHeads:
    """What the view shows: the scores, and where they come from."""

    syntax: SyntacticAttention
    settings: SyntaxSettings
    sentences_read: int  # the treebank's sentences taken (its first `max_sentences`, or all it has)

    def best_heads(self, min_count: int = MIN_RELATION_WORDS) -> list[BestHead]:
        """The best head over all words ("all"), then of each relation with at least `min_count` scored words,
        the most frequent first."""
        return [self.syntax.best_head(), *self.syntax.best_heads(min_count)]

    @property
    def caption(self) -> str:
        """What was scored, in one sentence: sentences, words, what was skipped and why."""
        syntax = self.syntax
        skipped = syntax.skipped
        text = (f"{syntax.num_sentences:,} of the first {self.sentences_read:,} sentences of {self.settings.source}: "
                f"{syntax.num_words:,} words scored (the root words have no head to find)")
        reasons = []
        if skipped.too_long:
            reasons.append(f"{len(skipped.too_long):,} longer than the model takes")
        if skipped.no_pieces:
            reasons.append(f"{len(skipped.no_pieces):,} with a word the tokenizer makes no piece of")
        if reasons:
            text += f"; {len(skipped):,} skipped ({', '.join(reasons)})"
        return text + "."

    def baselines_text(self) -> str:
        """Clark's offset baselines over all scored words, best first: "the next word 0.292 · …"."""
        syntax = self.syntax
        pairs = sorted(zip(syntax.offsets, syntax.offset_accuracy, strict=True), key=lambda item: -item[1])
        return " · ".join(f"{OFFSET_NAMES[offset]} ({offset:+d}) {accuracy:.3f}" for offset, accuracy in pairs)


@dataclass(frozen=True)
class SyntaxProgress:
    done: int  # batches scored
    total: int  # batches in all
    result: SyntaxHeads | None = None  # on the last progress only

    @property
    def text(self) -> str:
        return "reading the treebank…" if not self.total else f"scoring heads: batch {self.done} of {self.total}"


def read_treebank(settings: SyntaxSettings) -> list:
    """The treebank's first `max_sentences` sentences; LinguisticDataError (from bertcore.read_conllu) naming the
    file, the line and the fault when it cannot be read."""
    from bertcore.analysis.treebank import read_conllu, shipped_treebank

    if settings.treebank is None:
        return shipped_treebank("dev")[: settings.max_sentences]
    return read_conllu(os.path.expanduser(settings.treebank), max_sentences=settings.max_sentences)


def syntax_heads_run(model, tokenizer, settings: SyntaxSettings) -> Iterator[SyntaxProgress]:
    """Score every head of `model` on the treebank of `settings`, yielding after every batch (stop iterating to
    cancel); the last progress holds the result. LinguisticDataError for a treebank that cannot be read,
    AnalysisError when none of its sentences fits the model."""
    from bertcore.analysis.syntax import SyntaxScorer
    from bertcore.analysis.word_inputs import batches, layout_words, measuring, model_device, run_encoder

    yield SyntaxProgress(0, 0)
    sentences = read_treebank(settings)
    inputs, skipped = layout_words(model, tokenizer, [sentence.words for sentence in sentences])
    scorer = SyntaxScorer(sentences, inputs, skipped, model.config)
    config = model.config
    # bertcore.analysis.word_inputs.encoded_batches' batches, one at a time
    chosen = list(batches(inputs, tokenizer, model_device(model),
                          attention_values=config.num_hidden_layers * config.num_attention_heads))
    yield SyntaxProgress(0, len(chosen))
    for done, batch in enumerate(chosen, start=1):
        with measuring(model):
            output = run_encoder(model, batch, attentions=True)
            scorer.add(batch, output.attentions)
        if done < len(chosen):
            yield SyntaxProgress(done, len(chosen))
    yield SyntaxProgress(len(chosen), len(chosen), SyntaxHeads(scorer.result(), settings, len(sentences)))


def direction_name(direction: int) -> str:
    return DIRECTION_NAMES.get(direction, DIRECTIONS[direction])
