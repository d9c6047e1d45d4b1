"""What each layer knows: linear probes with control tasks (Hewitt & Liang 2019) and a structural distance probe
(Hewitt & Manning 2019), per layer, embeddings included.

A word's representation at a layer is the mean of its pieces' hidden states there (pieces as in
bertcore.analysis.word_inputs: the tokenizer's pieces of the word alone, as in the sentence).

**Linear probes** (`probe_layers`) predict a word's label (UPOS, XPOS, or its dependency relation, DEPREL) from
its representation, one probe per layer. The solver is closed-form ridge regression onto one-hot labels (a
least-squares classifier, scikit-learn's RidgeClassifier): features standardised with the training words' mean and
standard deviation, an intercept, the prediction the largest score. Its ridge strength is chosen per layer and per
task from RIDGE_GRID (× the number of training words) by accuracy on the last VALIDATION_SHARE of the training
sentences, then the probe is refitted on all of them: a Cholesky solve of a D × D system per strength, no gradient
steps, no randomness.

Hewitt & Liang's control task gives each word *type* (its exact form) a fixed random label, drawn from the
training words' label distribution with the seed, and trains the same probe on it. A probe that does well on the
control task can memorise word identities; `selectivity` = accuracy − control accuracy says how much of the
accuracy is the representation's rather than the probe's. `majority_baseline` is the accuracy of always answering
the training words' most frequent label.

**Structural probe** (`structural_probe`, Hewitt & Manning 2019): a rank-k linear map B (k ≤ 32) whose squared
distances ‖B(h_i − h_j)‖² approximate the words' distances in the dependency tree, trained per layer on their L1
loss (each sentence's summed |error| over its word pairs divided by its length squared, averaged over sentences)
with full-batch Adam for a fixed number of steps, B drawn with the seed. On the test sentences:
- UUAS: the minimum spanning tree of the predicted distances against that of the gold distances, undirected, with
  the punctuation words (UPOS PUNCT) left out of both, as Hewitt & Manning leave out Penn Treebank's punctuation
  tags; the share of gold edges found, over all test sentences.
- Spearman: per word, the Spearman correlation between its row of predicted and of gold distances (all words of
  the sentence); averaged over the sentences of each length, then over the lengths 5 to 50 (all lengths when none
  is in that range), as Hewitt & Manning's DSpr.

Same seed, same numbers: the control labels come from numpy's Generator(seed), B from a torch Generator(seed).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis.treebank import PUNCTUATION_UPOS, Sentence
from bertcore.analysis.word_inputs import SkippedSentences, encoded_batches, layout_words, measuring
from bertcore.errors import AnalysisError

TASKS = ("upos", "xpos", "deprel")  # what a linear probe predicts of each word
RIDGE_GRID = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)  # ridge strengths tried, × the number of training words
VALIDATION_SHARE = 0.2  # the last share of the training sentences that picks the ridge strength
STRUCTURAL_RANK = 32  # Hewitt & Manning's probe rank (they find ~64 enough for BERT-large; 32 for smaller models)
STRUCTURAL_STEPS = 100  # full-batch Adam steps per layer (MiniLM, 500 EWT sentences: 200 fit the training set
# closer but found fewer test edges than 100)
STRUCTURAL_LEARNING_RATE = 0.01
MAX_PAIR_PADDING = 1.5  # a structural probe batch's padded word pairs, at most this many times its real ones
SPEARMAN_LENGTHS = (5, 50)  # the sentence lengths Hewitt & Manning average Spearman over


@dataclass(frozen=True)
class LayerProbes:
    """One linear probe per layer (index 0: the embeddings' output) for one task, beside its control task."""

    task: str  # "upos", "xpos" or "deprel"
    labels: tuple[str, ...]  # the labels of the training words, most frequent first
    accuracy: np.ndarray  # (L + 1,) float64 on the test words
    control_accuracy: np.ndarray  # (L + 1,) float64 the same probe, trained and tested on the control labels
    majority_baseline: float  # accuracy of always answering the most frequent training label
    ridge: np.ndarray  # (L + 1,) float64 the chosen ridge strength (× training words) of the real task
    control_ridge: np.ndarray  # (L + 1,) float64 … and of the control task
    num_train_words: int
    num_test_words: int
    skipped_train: SkippedSentences
    skipped_test: SkippedSentences
    seed: int
    word_representation: str = "mean of its pieces"

    @property
    def selectivity(self) -> np.ndarray:
        """(L + 1,) accuracy − control accuracy (Hewitt & Liang 2019)."""
        return self.accuracy - self.control_accuracy

    @property
    def best_layer(self) -> int:
        """The layer whose probe is most accurate (the lowest on a tie)."""
        return int(np.argmax(self.accuracy))


@dataclass(frozen=True)
class StructuralProbe:
    """A structural distance probe per layer (index 0: the embeddings' output)."""

    uuas: np.ndarray  # (L + 1,) float64
    spearman: np.ndarray  # (L + 1,) float64
    rank: int
    steps: int
    final_loss: np.ndarray  # (L + 1,) float64 the training loss after the last step
    num_train_sentences: int
    num_test_sentences: int
    skipped_train: SkippedSentences
    skipped_test: SkippedSentences
    seed: int
    word_representation: str = "mean of its pieces"


def probe_layers(model: nn.Module, tokenizer, train: Sequence[Sentence], test: Sequence[Sentence], *,
                 task: str = "upos", seed: int = 0) -> LayerProbes:
    """A linear probe per layer for `task` ("upos", "xpos" or "deprel": the relation as written), trained on the
    words of `train` and tested on those of `test`, with Hewitt & Liang's control task. Deterministic for a seed."""
    if task not in TASKS:
        raise AnalysisError(f"task is {task!r}; a probe predicts one of {', '.join(TASKS)}")
    train_words = word_representations(model, tokenizer, train)
    test_words = word_representations(model, tokenizer, test)
    return fit_layer_probes(train_words, test_words, task=task, seed=seed)


@dataclass(frozen=True)
class WordRepresentations:
    """The words of some sentences at every layer: (L + 1, N, D) float32 vectors, words of the kept sentences in
    order, and the sentences themselves."""

    vectors: np.ndarray  # (L + 1, N, D)
    sentences: tuple[Sentence, ...]  # the sentences kept, in the order given
    skipped: SkippedSentences

    @property
    def sentence_starts(self) -> np.ndarray:
        """(S + 1,) where each sentence's words begin among the N, and N at the end."""
        return np.concatenate([[0], np.cumsum([len(sentence) for sentence in self.sentences])]).astype(np.int64)


def word_representations(model: nn.Module, tokenizer, sentences: Sequence[Sentence]) -> WordRepresentations:
    """Every word of `sentences` at every layer: the mean of its pieces' hidden states. Sentences too long for the
    model (or with a word without pieces) are skipped and counted."""
    if not sentences:
        raise AnalysisError("no sentences were given; pass a treebank's sentences (bertcore.read_conllu)")
    inputs, skipped = layout_words(model, tokenizer, [sentence.words for sentence in sentences])
    if not inputs:
        raise AnalysisError(f"none of the {len(sentences)} sentences fits the model ({len(skipped.too_long)} are too "
                            f"long, {len(skipped.no_pieces)} hold a word without pieces)")
    by_sentence: dict[int, np.ndarray] = {}
    with measuring(model):
        for batch, output in encoded_batches(model, tokenizer, inputs, hidden_states=True):
            add_word_vectors(by_sentence, batch, output.hidden_states)
    order = sorted(by_sentence)
    vectors = np.concatenate([by_sentence[index] for index in order], axis=1)  # (L + 1, N, D)
    return WordRepresentations(vectors, tuple(sentences[index] for index in order), skipped)


def add_word_vectors(by_sentence: dict[int, np.ndarray], batch, hidden_states: Sequence[torch.Tensor]) -> None:
    """Each sentence's word vectors (L + 1, W, D) from one batch's hidden states (L + 1 of (B, T, D)), by index."""
    membership = batch.membership()  # (B, W, T)
    mean = membership / membership.sum(dim=-1, keepdim=True).clamp(min=1)
    stacked = torch.stack(hidden_states).float()  # (L + 1, B, T, D)
    words = torch.einsum("bwt,lbtd->lbwd", mean, stacked).cpu().numpy()  # (L + 1, B, W, D)
    for row, (index, count) in enumerate(zip(batch.indices, batch.num_words.tolist(), strict=True)):
        by_sentence[index] = words[:, row, :count]


def fit_layer_probes(train: WordRepresentations, test: WordRepresentations, *, task: str = "upos",
                     seed: int = 0) -> LayerProbes:
    """`probe_layers` on representations already computed (the training record reuses its forward passes)."""
    if task not in TASKS:
        raise AnalysisError(f"task is {task!r}; a probe predicts one of {', '.join(TASKS)}")
    train_labels = _task_labels(train.sentences, task)
    test_labels = _task_labels(test.sentences, task)
    if len(train_labels) < 2:
        raise AnalysisError("the training sentences hold fewer than 2 words; give the probe more to learn from")
    counts = Counter(train_labels)
    labels = tuple(name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    label_index = {name: position for position, name in enumerate(labels)}
    train_y = np.array([label_index[name] for name in train_labels], np.int64)
    test_y = np.array([label_index.get(name, -1) for name in test_labels], np.int64)  # -1: never predicted right
    control_train, control_test = _control_labels(train.sentences, test.sentences, labels, counts, seed)
    validation_start = _validation_start(train)
    layers = train.vectors.shape[0]
    accuracy, control_accuracy = np.zeros(layers), np.zeros(layers)
    ridge, control_ridge = np.zeros(layers), np.zeros(layers)
    for layer in range(layers):
        solver = _RidgeSolver(train.vectors[layer], validation_start)
        ridge[layer], weights = solver.fit(train_y, len(labels))
        accuracy[layer] = float((solver.predict(weights, test.vectors[layer]) == test_y).mean())
        control_ridge[layer], weights = solver.fit(control_train, len(labels))
        control_accuracy[layer] = float((solver.predict(weights, test.vectors[layer]) == control_test).mean())
    return LayerProbes(task=task, labels=labels, accuracy=accuracy, control_accuracy=control_accuracy,
                       majority_baseline=float((test_y == 0).mean()), ridge=ridge, control_ridge=control_ridge,
                       num_train_words=len(train_y), num_test_words=len(test_y), skipped_train=train.skipped,
                       skipped_test=test.skipped, seed=seed)


def structural_probe(model: nn.Module, tokenizer, train: Sequence[Sentence], test: Sequence[Sentence], *,
                     rank: int = STRUCTURAL_RANK, steps: int = STRUCTURAL_STEPS, seed: int = 0) -> StructuralProbe:
    """Hewitt & Manning's structural distance probe per layer: UUAS and Spearman on `test` after training on `train`
    (see the module's docstring). Deterministic for a seed."""
    return fit_structural_probes(word_representations(model, tokenizer, train),
                                 word_representations(model, tokenizer, test), rank=rank, steps=steps, seed=seed)


def fit_structural_probes(train: WordRepresentations, test: WordRepresentations, *, rank: int = STRUCTURAL_RANK,
                          steps: int = STRUCTURAL_STEPS, seed: int = 0) -> StructuralProbe:
    """`structural_probe` on representations already computed."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= STRUCTURAL_RANK:
        raise AnalysisError(f"rank is {rank!r}; the structural probe's rank is 1 to {STRUCTURAL_RANK}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise AnalysisError(f"steps is {steps!r}; train the probe for at least 1 step")
    if not any(len(sentence) > 1 for sentence in train.sentences):
        raise AnalysisError("no training sentence has two words; a distance probe learns from pairs of words")
    train_batches = _distance_batches(train)
    gold_test = [tree_distances(sentence) for sentence in test.sentences]
    scorer = _TreeScorer(test.sentences, gold_test)
    layers = train.vectors.shape[0]
    uuas, spearman, final_loss = np.zeros(layers), np.zeros(layers), np.zeros(layers)
    for layer in range(layers):
        projection, final_loss[layer] = _train_distance_probe(train_batches, train.vectors[layer], rank, steps, seed)
        predicted = _predicted_distances(test, test.vectors[layer], projection)
        uuas[layer], spearman[layer] = scorer.score(predicted)
    return StructuralProbe(uuas=uuas, spearman=spearman, rank=rank, steps=steps, final_loss=final_loss,
                           num_train_sentences=len(train.sentences), num_test_sentences=len(test.sentences),
                           skipped_train=train.skipped, skipped_test=test.skipped, seed=seed)


def tree_distances(sentence: Sentence) -> np.ndarray:
    """(W, W) int64: the number of edges between two words in the sentence's dependency tree (undirected)."""
    count = len(sentence)
    distances = np.full((count, count), count + 1, np.int64)  # more than any path
    np.fill_diagonal(distances, 0)
    for index, head in enumerate(sentence.heads):
        if head:
            distances[index, head - 1] = distances[head - 1, index] = 1
    for middle in range(count):  # Floyd–Warshall: a sentence has tens of words
        distances = np.minimum(distances, distances[:, middle, None] + distances[None, middle, :])
    return distances


# ---- linear probes ---------------------------------------------------------------------------------------------


def _task_labels(sentences: Sequence[Sentence], task: str) -> list[str]:
    if task == "upos":
        return [tag for sentence in sentences for tag in sentence.upos]
    if task == "xpos":
        return [tag for sentence in sentences for tag in sentence.xpos]
    return [relation for sentence in sentences for relation in sentence.deprels]


def _control_labels(train: Sequence[Sentence], test: Sequence[Sentence], labels: tuple[str, ...],
                    counts: Counter, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Hewitt & Liang's control task: one label per word type (exact form), drawn once from the training words'
    label distribution; every occurrence of the type, in training or test, gets it."""
    types = sorted({word for sentence in (*train, *test) for word in sentence.words})
    shares = np.array([counts[name] for name in labels], np.float64)
    drawn = np.random.default_rng(seed).choice(len(labels), size=len(types), p=shares / shares.sum())
    of_type = dict(zip(types, drawn.tolist(), strict=True))
    return tuple(np.array([of_type[word] for sentence in sentences for word in sentence.words], np.int64)
                 for sentences in (train, test))


def _validation_start(train: WordRepresentations) -> int:
    """The index of the first training word of the validation sentences (the last VALIDATION_SHARE of them, at
    least one, unless there is only one sentence: then its last words)."""
    starts = train.sentence_starts
    count = len(train.sentences)
    if count == 1:
        return max(1, int(starts[-1] * (1 - VALIDATION_SHARE)))
    return int(starts[count - max(1, round(count * VALIDATION_SHARE))])


class _RidgeSolver:
    """Ridge regression onto one-hot labels over one layer's training features: a Cholesky solve per strength (of
    the fitting words' Gram matrix, D × D) tries each on the validation words, and one more refits on all words.

    The features are standardised with the training words' statistics (a constant dimension is only centred) and
    centred targets give the intercept, so the refit is scikit-learn's RidgeClassifier(alpha = strength × N) on the
    standardised features."""

    def __init__(self, features: np.ndarray, validation_start: int):
        features = torch.from_numpy(np.asarray(features)).double()  # (N, D)
        self.mean = features.mean(dim=0)
        scale = features.std(dim=0, correction=0)
        self.scale = torch.where(scale > 1e-12 * scale.max().clamp(min=1e-300), scale, torch.ones_like(scale))
        self.features = (features - self.mean) / self.scale  # (N, D), mean 0: centred for the refit
        self.validation_start = validation_start
        fitting, held = self.features[:validation_start], self.features[validation_start:]
        fitting_gram = fitting.T @ fitting  # (D, D) uncentred
        self.gram = fitting_gram + held.T @ held  # (D, D) of all training words, centred
        self.fitting_mean = fitting.mean(dim=0)
        self.fitting_gram = fitting_gram - len(fitting) * torch.outer(self.fitting_mean, self.fitting_mean)
        self._factors: dict[tuple[str, float], torch.Tensor] = {}  # the real and the control task share them

    def fit(self, targets: np.ndarray, num_labels: int) -> tuple[float, torch.Tensor]:
        """(chosen strength, weights (D + 1, C): the last row is the intercept) for integer labels (N,)."""
        one_hot = torch.nn.functional.one_hot(torch.from_numpy(targets), num_labels).double()  # (N, C)
        start = self.validation_start
        best_strength, best_accuracy = RIDGE_GRID[-1], -1.0
        if start < len(targets):
            fitting_y = one_hot[:start]
            y_mean = fitting_y.mean(dim=0)
            cross = self.features[:start].T @ fitting_y - start * torch.outer(self.fitting_mean, y_mean)  # (D, C)
            held = self.features[start:] - self.fitting_mean
            for strength in RIDGE_GRID:  # the larger strength wins a tie: the simpler probe
                coefficients = self._solve("fitting", strength * start, cross)  # (D, C)
                predicted = (held @ coefficients + y_mean).argmax(dim=1).numpy()
                accuracy = float((predicted == targets[start:]).mean())
                if accuracy >= best_accuracy:
                    best_strength, best_accuracy = strength, accuracy
        y_mean = one_hot.mean(dim=0)
        coefficients = self._solve("all", best_strength * len(targets), self.features.T @ (one_hot - y_mean))
        return best_strength, torch.cat([coefficients, y_mean[None]])  # the features' mean is 0: intercept = y_mean

    def predict(self, weights: torch.Tensor, features: np.ndarray) -> np.ndarray:
        standardised = (torch.from_numpy(np.asarray(features)).double() - self.mean) / self.scale
        return (standardised @ weights[:-1] + weights[-1]).argmax(dim=1).numpy()

    def _solve(self, words: str, penalty: float, cross: torch.Tensor) -> torch.Tensor:
        """(Gram + penalty I)⁻¹ cross, the Gram of the fitting words or of all, by Cholesky: positive definite for any
        penalty > 0, and for D = 256 a tenth of the time of the eigendecomposition the grid took before."""
        factor = self._factors.get((words, penalty))
        if factor is None:
            gram = self.fitting_gram if words == "fitting" else self.gram
            factor = self._factors[words, penalty] = torch.linalg.cholesky(
                gram + penalty * torch.eye(len(gram), dtype=gram.dtype))
        return torch.cholesky_solve(cross, factor)


# ---- the structural probe -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DistanceBatch:
    """Sentences of similar length as a padded (S, W) table of word rows into the (N, D) word vectors, with their gold
    distances."""

    rows: torch.Tensor  # (S, W) long, index among the N words; 0 on padding (masked out)
    real: torch.Tensor  # (S, W) bool
    gold: torch.Tensor  # (S, W, W) float32 tree distances; 0 on padding
    lengths: torch.Tensor  # (S,) float32

    @classmethod
    def of(cls, words: WordRepresentations, chosen: Sequence[int]) -> _DistanceBatch:
        starts = words.sentence_starts
        sentences = [words.sentences[index] for index in chosen]
        width = max(len(sentence) for sentence in sentences)
        rows = np.zeros((len(chosen), width), np.int64)
        real = np.zeros((len(chosen), width), bool)
        gold = np.zeros((len(chosen), width, width), np.float32)
        for row, (index, sentence) in enumerate(zip(chosen, sentences, strict=True)):
            size = len(sentence)
            rows[row, :size] = np.arange(starts[index], starts[index] + size)
            real[row, :size] = True
            gold[row, :size, :size] = tree_distances(sentence)
        return cls(torch.from_numpy(rows), torch.from_numpy(real), torch.from_numpy(gold),
                   torch.tensor([len(sentence) for sentence in sentences], dtype=torch.float32))

    def squared_distances(self, projected: torch.Tensor) -> torch.Tensor:
        """(S, W, W) ‖B h_i − B h_j‖² from the projected word vectors (N, k); 0 where padding is involved."""
        vectors = projected[self.rows] * self.real[..., None]  # (S, W, k)
        norms = (vectors * vectors).sum(-1)  # (S, W)
        distances = norms[:, :, None] + norms[:, None, :] - 2 * vectors @ vectors.transpose(1, 2)
        return distances.clamp(min=0) * (self.real[:, :, None] & self.real[:, None, :])

    def loss_sum(self, projected: torch.Tensor) -> torch.Tensor:
        """Σ over these sentences of Hewitt & Manning's per-sentence loss: Σ_ij |predicted − gold| / length²."""
        errors = (self.squared_distances(projected) - self.gold).abs().sum(dim=(1, 2))  # (S,)
        return (errors / self.lengths ** 2).sum()


def _distance_batches(words: WordRepresentations) -> list[_DistanceBatch]:
    """The sentences sorted by length, cut into batches whose padded pairs (count × longest²) stay within
    MAX_PAIR_PADDING times their real pairs (Σ length²): EWT's long tail padded to its longest would be 4 times the
    work."""
    order = sorted(range(len(words.sentences)), key=lambda index: len(words.sentences[index]))
    batches, chosen, real = [], [], 0
    for index in order:
        size = len(words.sentences[index])
        if chosen and (len(chosen) + 1) * size * size > MAX_PAIR_PADDING * (real + size * size):
            batches.append(_DistanceBatch.of(words, chosen))
            chosen, real = [], 0
        chosen.append(index)
        real += size * size
    batches.append(_DistanceBatch.of(words, chosen))
    return batches


def _predicted_distances(words: WordRepresentations, vectors: np.ndarray,
                         projection: torch.Tensor) -> list[np.ndarray]:
    """Each sentence's (W, W) predicted squared distances, computed from differences (no cancellation)."""
    projected = torch.from_numpy(np.ascontiguousarray(vectors)).double() @ projection.double().T  # (N, k)
    starts = words.sentence_starts
    out = []
    for index in range(len(words.sentences)):
        sentence = projected[starts[index] : starts[index + 1]]  # (W, k)
        out.append(((sentence[:, None, :] - sentence[None, :, :]) ** 2).sum(-1).numpy())
    return out


def _train_distance_probe(batches: Sequence[_DistanceBatch], vectors: np.ndarray, rank: int, steps: int,
                          seed: int) -> tuple[torch.Tensor, float]:
    """B (k, D) trained on Hewitt & Manning's L1 distance loss, full batch, Adam; and the final loss."""
    features = torch.from_numpy(np.ascontiguousarray(vectors)).float()  # (N, D)
    generator = torch.Generator().manual_seed(seed)
    projection = (torch.rand(rank, features.shape[1], generator=generator) * 0.1 - 0.05).requires_grad_()
    optimizer = torch.optim.Adam([projection], lr=STRUCTURAL_LEARNING_RATE)
    count = sum(len(batch.lengths) for batch in batches)
    loss = torch.zeros(())
    with torch.enable_grad():
        for _ in range(steps):
            projected = features @ projection.T  # (N, k)
            loss = sum(batch.loss_sum(projected) for batch in batches) / count
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return projection.detach(), float(loss.detach())


class _TreeScorer:
    """UUAS and Spearman of predicted distances against the gold trees of the test sentences."""

    def __init__(self, sentences: Sequence[Sentence], gold: Sequence[np.ndarray]):
        self.keep = [np.array([tag != PUNCTUATION_UPOS for tag in sentence.upos]) for sentence in sentences]
        self.gold_edges = [_spanning_tree(distances, keep) for distances, keep in zip(gold, self.keep, strict=True)]
        self.gold_ranks = [_row_ranks(distances) for distances in gold]

    def score(self, predicted: Sequence[np.ndarray]) -> tuple[float, float]:
        found = total = 0
        by_length: dict[int, list[float]] = defaultdict(list)
        for distances, keep, gold_edges, gold_ranks in zip(predicted, self.keep, self.gold_edges, self.gold_ranks,
                                                           strict=True):
            found += len(gold_edges & _spanning_tree(distances, keep))
            total += len(gold_edges)
            if len(distances) > 1:
                by_length[len(distances)].extend(_row_correlations(_row_ranks(distances), gold_ranks))
        low, high = SPEARMAN_LENGTHS
        lengths = [length for length in by_length if low <= length <= high] or list(by_length)
        means = [float(np.nanmean(by_length[length])) for length in lengths
                 if not np.all(np.isnan(by_length[length]))]
        return (found / total if total else float("nan"), float(np.mean(means)) if means else float("nan"))


def _spanning_tree(distances: np.ndarray, keep: np.ndarray) -> set[tuple[int, int]]:
    """The undirected edges (i < j) of a minimum spanning tree over the kept words (Prim's; ties to the lowest
    index)."""
    nodes = np.flatnonzero(keep)
    if len(nodes) < 2:
        return set()
    weights = np.asarray(distances, np.float64)[np.ix_(nodes, nodes)]
    count = len(nodes)
    in_tree = np.zeros(count, bool)
    in_tree[0] = True
    best, parent = weights[0].copy(), np.zeros(count, np.int64)
    edges = set()
    for _ in range(count - 1):
        chosen = int(np.argmin(np.where(in_tree, np.inf, best)))
        a, b = int(nodes[parent[chosen]]), int(nodes[chosen])
        edges.add((min(a, b), max(a, b)))
        in_tree[chosen] = True
        closer = weights[chosen] < best
        best = np.where(closer, weights[chosen], best)
        parent = np.where(closer, chosen, parent)
    return edges


def _row_ranks(matrix: np.ndarray) -> np.ndarray:
    """Each row's values ranked 1..n, ties given their average rank (as scipy.stats.rankdata)."""
    ranks = np.empty(matrix.shape, np.float64)
    for index, row in enumerate(np.asarray(matrix)):
        _, inverse, counts = np.unique(row, return_inverse=True, return_counts=True)
        ends = np.cumsum(counts)
        ranks[index] = (ends - (counts - 1) / 2.0)[inverse]
    return ranks


def _row_correlations(ranks: np.ndarray, other: np.ndarray) -> list[float]:
    """Pearson correlation of each pair of rows (of ranks: Spearman's); nan for a constant row."""
    a = ranks - ranks.mean(axis=1, keepdims=True)
    b = other - other.mean(axis=1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return list(np.where(denominator > 0, (a * b).sum(axis=1) / denominator, np.nan))
