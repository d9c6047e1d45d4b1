"""How alike two models' representations are, layer by layer: linear CKA over the same words.

    similarity = bertcore.representation_similarity(model_a, tokenizer_a, model_b, tokenizer_b, sentences)
    similarity.cka       # (L + 1,) a number per layer, embeddings first; 1 = alike up to rotation and scale

**Linear CKA** (centred kernel alignment with a linear kernel; Kornblith, Norouzi, Lee & Hinton, ICML 2019, eq. 5)
compares two sets of vectors of the same n examples, X (n × d₁) and Y (n × d₂), each centred column by column:

    CKA(X, Y) = ‖YᵀX‖²_F / (‖XᵀX‖_F · ‖YᵀY‖_F)

It is the Hilbert–Schmidt independence criterion of the two linear kernels XXᵀ and YYᵀ, normalised, so it lies in
[0, 1] and compares layers of different widths. It does not change when either side is rotated or reflected (an
orthogonal transform) or scaled by one number, but it does change under other invertible linear maps, which is
why Kornblith et al. prefer it to CCA for telling layers apart. Computed in feature space from d × d products in
float64 (n·d² work rather than the kernels' n²·d: here words outnumber dimensions). A side without variance (every
vector the same) has no similarity to speak of: NaN.

**The examples are words**: a word's vector at a layer is the mean of its pieces' hidden states there, its pieces
being the tokenizer's pieces of that word alone (bertcore.analysis.word_inputs), so two models with different
tokenizers (a fine-tuned model and its base; two families) are compared on the same examples. A sentence either
model cannot take (too long, or holding a word its tokenizer makes no piece of) is left out for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis.probes import add_word_vectors
from bertcore.analysis.treebank import Sentence, shipped_treebank
from bertcore.analysis.word_inputs import encoded_batches, layout_words, measuring
from bertcore.errors import AnalysisError

DEFAULT_SENTENCES = 64  # the shipped treebank's first sentences, when none are given (~900 words)


@dataclass(frozen=True)
class RepresentationSimilarity:
    """Linear CKA between two models' word vectors, layer by layer (index 0: the embeddings' output)."""

    cka: np.ndarray  # (L + 1,) float64; NaN where a layer of either model gives every word the same vector
    num_words: int  # the words compared (examples of the CKA)
    num_sentences: int  # the sentences both models took
    skipped: tuple[int, ...]  # the sentences left out (by index among those given): one model or the other could not
    word_representation: str = "mean of its pieces"


def linear_cka(x, y) -> float:
    """Linear CKA (Kornblith et al. 2019) of two representations of the same n examples: x (n, d₁) and y (n, d₂),
    numpy arrays or tensors. Each is centred column by column; in [0, 1], NaN when either has no variance."""
    x, y = _matrix(x, "x"), _matrix(y, "y")
    if x.shape[0] != y.shape[0]:
        raise AnalysisError(f"x holds {x.shape[0]} examples and y {y.shape[0]}; CKA compares two representations "
                            "of the same examples, row by row")
    if x.shape[0] < 2:
        raise AnalysisError(f"{x.shape[0]} example; CKA needs at least 2 to centre and compare")
    x = x - x.mean(dim=0)
    y = y - y.mean(dim=0)
    cross = torch.linalg.matrix_norm(y.T @ x) ** 2  # ‖YᵀX‖²_F
    scale = torch.linalg.matrix_norm(x.T @ x) * torch.linalg.matrix_norm(y.T @ y)
    return float(cross / scale) if scale > 0 else float("nan")


def representation_similarity(model_a: nn.Module, tokenizer_a, model_b: nn.Module, tokenizer_b,
                              sentences: Sequence[Sentence | str | Sequence[str]] | None = None
                              ) -> RepresentationSimilarity:
    """Linear CKA between the two models' word vectors at each layer (embeddings first), over `sentences`:
    treebank sentences, texts (split into words at spaces) or lists of words; default: the first DEFAULT_SENTENCES
    of the shipped treebank. The models must have the same number of layers (AnalysisError otherwise)."""
    layers_a, layers_b = model_a.config.num_hidden_layers, model_b.config.num_hidden_layers
    if layers_a != layers_b:
        raise AnalysisError(f"model A has {layers_a} layers and model B {layers_b}; the similarity compares them "
                            "layer by layer, so both must have the same number of layers")
    if sentences is None:
        sentences = shipped_treebank("dev", max_sentences=DEFAULT_SENTENCES)
    if isinstance(sentences, str):
        raise AnalysisError("pass a list of sentences (texts, word lists or treebank sentences), not one string")
    words = [_words_of(sentence, index) for index, sentence in enumerate(sentences)]
    if not words:
        raise AnalysisError("no sentences were given; the similarity compares the models on the words of some")
    kept_a, skipped_a = _kept(model_a, tokenizer_a, words)
    kept_b, skipped_b = _kept(model_b, tokenizer_b, words)
    kept = sorted(kept_a & kept_b)
    if not kept:
        raise AnalysisError(f"none of the {len(words)} sentences fits both models (model A leaves out "
                            f"{len(skipped_a)}, model B {len(skipped_b)}: too long, or a word without pieces)")
    chosen = [words[index] for index in kept]
    vectors_a = _word_vectors(model_a, tokenizer_a, chosen)  # (L + 1, N, D_a)
    vectors_b = _word_vectors(model_b, tokenizer_b, chosen)  # (L + 1, N, D_b)
    cka = np.array([linear_cka(a, b) for a, b in zip(vectors_a, vectors_b, strict=True)])
    return RepresentationSimilarity(cka=cka, num_words=vectors_a.shape[1], num_sentences=len(kept),
                                    skipped=tuple(sorted(set(range(len(words))) - set(kept))))


def _words_of(sentence: Sentence | str | Sequence[str], index: int) -> tuple[str, ...]:
    if isinstance(sentence, Sentence):
        words = sentence.words
    elif isinstance(sentence, str):
        words = tuple(sentence.split())
    elif isinstance(sentence, Sequence) and all(isinstance(word, str) for word in sentence):
        words = tuple(sentence)
    else:
        raise AnalysisError(f"sentence {index} is a {type(sentence).__name__}; give a text, a list of words or a "
                            "treebank sentence (bertcore.read_conllu)")
    if not words or any(not word or word.isspace() for word in words):
        raise AnalysisError(f"sentence {index} ({' '.join(words)[:60]!r}) has no words, or an empty one; give "
                            "sentences of words")
    return words


def _kept(model: nn.Module, tokenizer, words: list[tuple[str, ...]]) -> tuple[set[int], tuple[int, ...]]:
    """The sentences the model takes (indices), and those it does not."""
    _, skipped = layout_words(model, tokenizer, words)
    return set(range(len(words))) - set(skipped.indices), skipped.indices


def _word_vectors(model: nn.Module, tokenizer, words: list[tuple[str, ...]]) -> np.ndarray:
    """(L + 1, N, D) float32: every word of the sentences (which all fit the model), in order, at every layer."""
    inputs, _ = layout_words(model, tokenizer, words)
    by_sentence: dict[int, np.ndarray] = {}
    with measuring(model):
        for batch, output in encoded_batches(model, tokenizer, inputs, hidden_states=True):
            add_word_vectors(by_sentence, batch, output.hidden_states)
    return np.concatenate([by_sentence[index] for index in range(len(words))], axis=1)


def _matrix(values, name: str) -> torch.Tensor:
    """(n, d) float64 from a numpy array or a tensor."""
    if isinstance(values, torch.Tensor):
        matrix = values.detach().cpu().double()
    else:
        matrix = torch.from_numpy(np.array(values, dtype=np.float64))
    if matrix.ndim != 2:
        raise AnalysisError(f"{name} has shape {tuple(matrix.shape)}; give (examples, dimensions)")
    if not torch.isfinite(matrix).all():
        raise AnalysisError(f"{name} holds NaN or infinite values; a similarity of them means nothing")
    return matrix
