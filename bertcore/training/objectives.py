"""The family's pretraining objectives, one class each: what a model learns from, its loss, and its metrics.

- `MaskedLmNextSentence` ("mlm+nsp", BERT, Devlin et al. 2019): masked LM + next-sentence prediction on
  `[CLS] A [SEP] B [SEP]` pairs whose B follows A half of the time (bertcore.data.segments).
- `MaskedLm` ("mlm", RoBERTa, Liu et al. 2019): masked LM alone on full sentences packed across documents
  (bertcore.data.segments.FULL_SENTENCES); any family's masked-LM class.
- `MaskedLmSentenceOrder` ("mlm+sop", ALBERT, Lan et al. 2020): masked LM + sentence-order prediction on two
  consecutive segments swapped half of the time (bertcore.data.segments.SENTENCE_ORDER).
- `ReplacedTokenDetection` ("rtd", ELECTRA, Clark et al. 2020): a small generator (an ElectraForMaskedLM of
  `generator_width` the discriminator's width, sharing its embeddings) fills the masked positions with tokens
  sampled from its softmax; the discriminator (ElectraForPreTraining) says of every token whether it was replaced.
  Both train together on loss = generator MLM loss + `discriminator_weight` × discriminator loss (50 in the paper),
  as one module (`ElectraPretraining`, beside its objective).

An objective gives the pretraining task (bertcore.training.pretraining.PretrainingTask) four things: the model (built
from a size preset in the family's transformers layout, or adopted from a loaded folder: `build`, `adopt`), the
examples (`recipe`: None for BERT's pairs), the numbers of one forward pass that add up over batches and processes
(`sums`), and what they mean (`metrics`, `loss`). Which family trains with which objective is the family registry's
(`bertcore.models.families.FAMILIES[...].objectives`).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.data.segments import ELECTRA_FULL_SENTENCES, FULL_SENTENCES, SENTENCE_ORDER, ExampleRecipe
from bertcore.models.families import pretraining_class, pretraining_objectives
from bertcore.models.parts import IGNORE_INDEX

GENERATOR_FOLDER = "generator"  # rtd: the generator's own folder inside a checkpoint and final/ (transformers layout)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def family_of(model: nn.Module) -> str:
    """The family (model_type) of a model of any class here; XLM-RoBERTa counts as RoBERTa."""
    model_type = model.config.to_dict().get("model_type", "bert")
    return "roberta" if model_type == "xlm-roberta" else model_type


def family_config(arch: str, sizes, *, vocab_size: int, pad_token_id: int, cls_token_id: int, sep_token_id: int,
                  seq_len: int):
    """A new model's config for family `arch`, at the sizes of `sizes` (a BertConfig preset, maybe with
    --hidden-size etc.), for a vocabulary of `vocab_size` with these special ids and sequences of `seq_len`."""
    positions = max(sizes.max_position_embeddings, seq_len)
    shape = dict(vocab_size=vocab_size, hidden_size=sizes.hidden_size, num_hidden_layers=sizes.num_hidden_layers,
                 num_attention_heads=sizes.num_attention_heads, intermediate_size=sizes.intermediate_size,
                 pad_token_id=pad_token_id)
    if arch == "bert":
        return sizes.replace(vocab_size=vocab_size, max_position_embeddings=positions)
    if arch == "roberta":
        from bertcore.models.roberta import RobertaConfig

        # Positions count from pad + 1 (fairseq's offset): the table holds pad + 1 more rows than the text needs.
        return RobertaConfig(**shape, max_position_embeddings=positions + pad_token_id + 1)
    if arch == "distilbert":
        from bertcore.models.distilbert import DistilBertConfig

        return DistilBertConfig(**shape, max_position_embeddings=positions)
    if arch == "electra":
        from bertcore.models.electra import ElectraConfig

        # ELECTRA-small's embeddings are half its width (128 of 256), base's as wide (768).
        embedding_size = sizes.hidden_size // 2 if sizes.hidden_size <= 256 else sizes.hidden_size
        return ElectraConfig(**shape, max_position_embeddings=positions, embedding_size=embedding_size)
    if arch == "albert":
        from bertcore.models.albert import AlbertConfig

        # ALBERT v2: 128-wide embeddings, GELU's tanh form, no dropout, every depth one shared layer.
        return AlbertConfig(**shape, max_position_embeddings=positions, embedding_size=min(128, sizes.hidden_size),
                            hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if arch == "modernbert":
        from bertcore.models.modernbert import ModernBertConfig

        # GeGLU halves 1.5 × hidden wide (ModernBERT-base: 1152 of 768); the MLM head on labelled rows only.
        return ModernBertConfig(**{**shape, "intermediate_size": sizes.hidden_size * 3 // 2},
                                max_position_embeddings=positions, cls_token_id=cls_token_id,
                                sep_token_id=sep_token_id, bos_token_id=cls_token_id, eos_token_id=sep_token_id,
                                sparse_prediction=True)
    raise ValueError(f"arch {arch!r} is unknown")


class Objective:
    """What a pretraining run learns: see the module's notes. Subclasses set the class attributes."""

    name: str  # as --objective spells it
    recipe: ExampleRecipe | None = None  # its examples; None: BERT's next-sentence pairs
    metric_names: tuple[str, ...] = ()  # its metrics, in the order of step records
    progress: tuple[tuple[str, str], ...] = ()  # (metric, short label) on bert-train's progress bar

    def model_class(self, arch: str) -> type:
        return pretraining_class(arch, self.name)

    def check_arch(self, arch: str, where: str) -> None:
        supported = pretraining_objectives(arch)
        if self.name not in supported:
            raise ValueError(f"{where} is a {arch} model, which has no head for {self.name}: {arch} supports "
                             f"{' and '.join(supported) or 'no pretraining'}. Use --objective {supported[0]}"
                             if supported else f"{where} is a {arch} model, which bert-train cannot pretrain")

    def build(self, arch: str, model_config, config) -> nn.Module:
        """A new model of family `arch` with `model_config` (family_config's), seeded by config.seed."""
        self.check_arch(arch, "--arch")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            return self.model_class(arch)(model_config)

    def adopt(self, loaded: nn.Module, folder: Path, config) -> nn.Module:
        """The model to train from a loaded folder (init_from, a resumed checkpoint): itself when it is of this
        objective's class; else the objective's class of its family with the folder's encoder and any heads the two
        share (the other heads start fresh). A task model (a fine-tuned classifier) is refused."""
        arch = family_of(loaded)
        self.check_arch(arch, str(folder))
        wanted = self.model_class(arch)
        own_classes = {pretraining_class(arch, name) for name in pretraining_objectives(arch)}
        if type(loaded) not in own_classes:
            raise ValueError(f"{folder} holds a {type(loaded).__name__}, a task model; pretraining continues a "
                             f"{' or '.join(sorted(c.__name__ for c in own_classes))} (or a bare encoder). Fine-tune "
                             "it with bert-finetune instead")
        if type(loaded) is wanted:
            model = loaded
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed)
                model = wanted(loaded.config)
            model.load_state_dict(loaded.state_dict(), strict=False)  # the encoder and shared heads; others fresh
        with contextlib.suppress(AttributeError):  # a class whose heads are always there has no setter
            model.has_pretraining_heads = True  # trained from here on (a bare encoder's heads start fresh): saved too
        return model.train()

    def published(self, model: nn.Module) -> nn.Module:
        """The model people get from a checkpoint or final/ (and the one the app probes)."""
        return model

    def write_model_files(self, model: nn.Module, tokenizer, folder: Path) -> None:
        from bertcore.models.checkpoint import write_pretrained_files

        write_pretrained_files(self.published(model), tokenizer, folder)

    def sums(self, output, batch) -> torch.Tensor:
        """1-D float tensor of numbers that add up over batches and processes."""
        raise NotImplementedError

    def metrics(self, sums: list[float]) -> dict[str, float]:
        raise NotImplementedError

    def loss(self, sums: list[float]) -> float:
        raise NotImplementedError


def _mlm_sums(logits: torch.Tensor, labels: torch.Tensor, loss: torch.Tensor) -> list[torch.Tensor]:
    """(loss × masked, correct, masked) of one masked-LM forward pass. logits (B, T, V), or (N, V) when the model
    ran its head on the labelled rows only (BERT's training path, ModernBERT's sparse prediction)."""
    labelled = labels != IGNORE_INDEX  # (B, T)
    rows = logits if logits.dim() == 2 else logits[labelled]  # (N, V), in the row-major order of labels[labelled]
    masked_labels = labels[labelled]
    correct = (rows.argmax(-1) == masked_labels).sum().float()
    count = torch.tensor(float(masked_labels.numel()), device=correct.device)
    return [loss.detach().float() * count, correct, count]


class MaskedLmNextSentence(Objective):
    """BERT's: masked LM + next-sentence prediction; a BertForPreTraining."""

    name = "mlm+nsp"
    metric_names = ("mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy")
    progress = (("mlm_accuracy", "mlm_acc"), ("nsp_accuracy", "nsp_acc"))

    def sums(self, output, batch) -> torch.Tensor:
        """(mlm loss·n_masked, mlm correct, n_masked, nsp loss·B, nsp correct, B)."""
        masked_labels = batch.labels[batch.labels != IGNORE_INDEX]  # (N,), in the order of prediction_logits rows
        mlm_correct = (output.prediction_logits.argmax(-1) == masked_labels).sum()
        nsp_correct = (output.seq_relationship_logits.argmax(-1) == batch.next_sentence_label).sum()
        num_masked, num_examples = masked_labels.numel(), batch.next_sentence_label.numel()
        return torch.stack([
            output.mlm_loss.detach().float() * num_masked, mlm_correct.float(),
            torch.tensor(float(num_masked), device=mlm_correct.device),
            output.nsp_loss.detach().float() * num_examples, nsp_correct.float(),
            torch.tensor(float(num_examples), device=mlm_correct.device),
        ])

    def metrics(self, sums: list[float]) -> dict[str, float]:
        mlm_loss, mlm_correct, masked, nsp_loss, nsp_correct, examples = sums
        return {"mlm_loss": mlm_loss / masked, "nsp_loss": nsp_loss / examples, "mlm_accuracy": mlm_correct / masked,
                "nsp_accuracy": nsp_correct / examples}

    def loss(self, sums: list[float]) -> float:
        mlm_loss, _, masked, nsp_loss, _, examples = sums
        return mlm_loss / masked + nsp_loss / examples


class MaskedRowsOnly(nn.Module):
    """A family's masked LM trained with its head on the masked rows only (~15% of positions): its encoder, then
    its `mlm_logits` on the labelled positions. The loss is the model's own forward's, without the (B, T, V) scores
    of positions no label reads. `model` is what is saved and probed."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.config = model.config

    def num_parameters(self) -> int:
        return self.model.num_parameters()

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None):
        from bertcore.models.bert import MaskedLMOutput
        from bertcore.models.families import base_model_name

        encoder = getattr(self.model, base_model_name(self.model))
        hidden = encoder(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask).last_hidden_state
        labelled = labels != IGNORE_INDEX  # (B, T)
        logits = self.model.mlm_logits(hidden[labelled])  # (N, V), in the row-major order of labels[labelled]
        return MaskedLMOutput(F.cross_entropy(logits.float(), labels[labelled]), logits, None, None)


class MaskedLm(Objective):
    """RoBERTa's: masked LM alone on full sentences; any family's masked-LM class, trained through
    `MaskedRowsOnly` (ModernBERT's own sparse prediction does the same)."""

    name = "mlm"
    recipe = FULL_SENTENCES
    metric_names = ("mlm_loss", "mlm_accuracy")
    progress = (("mlm_accuracy", "mlm_acc"),)

    @staticmethod
    def _trained(model: nn.Module) -> nn.Module:
        return MaskedRowsOnly(model) if hasattr(model, "mlm_logits") else model

    def build(self, arch: str, model_config, config) -> nn.Module:
        return self._trained(super().build(arch, model_config, config))

    def adopt(self, loaded: nn.Module, folder: Path, config) -> nn.Module:
        return self._trained(super().adopt(loaded, folder, config))

    def published(self, model: nn.Module) -> nn.Module:
        return model.model if isinstance(model, MaskedRowsOnly) else model

    def sums(self, output, batch) -> torch.Tensor:
        return torch.stack(_mlm_sums(output.logits, batch.labels, output.loss))

    def metrics(self, sums: list[float]) -> dict[str, float]:
        mlm_loss, correct, masked = sums
        return {"mlm_loss": _ratio(mlm_loss, masked), "mlm_accuracy": _ratio(correct, masked)}

    def loss(self, sums: list[float]) -> float:
        return sums[0] / sums[2]


class MaskedLmSentenceOrder(Objective):
    """ALBERT's: masked LM + sentence-order prediction; an AlbertForPreTraining."""

    name = "mlm+sop"
    recipe = SENTENCE_ORDER
    metric_names = ("mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy")
    progress = (("mlm_accuracy", "mlm_acc"), ("sop_accuracy", "sop_acc"))

    def sums(self, output, batch) -> torch.Tensor:
        order = batch.sentence_order_label
        sop_correct = (output.sop_logits.argmax(-1) == order).sum().float()
        examples = torch.tensor(float(order.numel()), device=sop_correct.device)
        return torch.stack([*_mlm_sums(output.prediction_logits, batch.labels, output.mlm_loss),
                            output.sop_loss.detach().float() * examples, sop_correct, examples])

    def metrics(self, sums: list[float]) -> dict[str, float]:
        mlm_loss, mlm_correct, masked, sop_loss, sop_correct, examples = sums
        return {"mlm_loss": mlm_loss / masked, "sop_loss": sop_loss / examples, "mlm_accuracy": mlm_correct / masked,
                "sop_accuracy": sop_correct / examples}

    def loss(self, sums: list[float]) -> float:
        return sums[0] / sums[2] + sums[3] / sums[5]


# ---- ELECTRA's pretraining model: a small generator fills the masked positions with samples from its softmax,
# the discriminator says of every token whether it was replaced; both train together as one module, sharing
# the embeddings. The "rtd" objective below builds, saves and scores it.

@dataclass
class ReplacedTokenDetectionOutput:
    loss: torch.Tensor  # () generator_loss + discriminator_weight × discriminator_loss
    generator_loss: torch.Tensor  # () mean cross-entropy over the masked positions
    discriminator_loss: torch.Tensor  # () mean binary cross-entropy over the real (unpadded) positions
    generator_logits: torch.Tensor  # (N, V) at the masked positions, in the row-major order of labels[labelled]
    discriminator_logits: torch.Tensor  # (B, T): > 0 says "replaced"
    replaced: torch.Tensor  # (B, T) bool: the discriminator's input differs from the original there


class ElectraPretraining(nn.Module):
    """ELECTRA's generator and discriminator trained together, sharing one embedding module (token, position and
    segment tables and their LayerNorm, as the paper shares them); the generator's decoder is tied to the shared
    word embeddings. `config` is the discriminator's: it is the model people fine-tune."""

    def __init__(self, discriminator: nn.Module, generator: nn.Module, discriminator_weight: float = 50.0):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.discriminator_weight = discriminator_weight
        shared = discriminator.electra.embeddings
        generator.electra.embeddings = shared
        generator.generator_lm_head.weight = shared.word_embeddings.weight  # tied; the bias stays the generator's
        self.config = discriminator.config

    def num_parameters(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())  # shared tensors count once

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                ) -> ReplacedTokenDetectionOutput:
        """input_ids (B, T) masked; labels (B, T) the original ids at the masked positions, -100 elsewhere."""
        if labels is None:
            raise ValueError("replaced-token detection needs labels: the original ids at the masked positions")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        labelled = labels != IGNORE_INDEX  # (B, T)
        hidden = self.generator.electra(input_ids, token_type_ids, attention_mask).last_hidden_state  # (B, T, Dg)
        generator_logits = self.generator.mlm_logits(hidden[labelled])  # (N, V): the masked rows only
        generator_loss = F.cross_entropy(generator_logits.float(), labels[labelled])
        with torch.no_grad():  # the sample is an input to the discriminator, not a path for gradients
            sampled = torch.multinomial(F.softmax(generator_logits.detach().float(), dim=-1), 1).squeeze(1)  # (N,)
        originals = torch.where(labelled, labels, input_ids)  # (B, T)
        corrupted = originals.masked_scatter(labelled, sampled.to(originals.dtype))  # (B, T)
        real = attention_mask.bool()
        replaced = (corrupted != originals) & real  # a sample equal to the original counts as original
        discriminator_logits = self.discriminator(corrupted, token_type_ids, attention_mask).logits  # (B, T)
        discriminator_loss = F.binary_cross_entropy_with_logits(discriminator_logits[real].float(),
                                                                replaced[real].float())
        loss = generator_loss + self.discriminator_weight * discriminator_loss
        return ReplacedTokenDetectionOutput(loss, generator_loss, discriminator_loss, generator_logits,
                                            discriminator_logits, replaced)


def generator_config(discriminator_config, width: float):
    """The generator's config: the discriminator's with hidden size, heads and FFN scaled by `width` (the paper's
    1/4 for small, 1/3 for base), the same depth and embedding width (the embeddings are shared)."""
    hidden = max(1, round(discriminator_config.hidden_size * width))
    heads = max(1, min(hidden, round(discriminator_config.num_attention_heads * width)))
    while hidden % heads:
        heads -= 1
    return discriminator_config.replace(hidden_size=hidden, num_attention_heads=heads,
                                        intermediate_size=max(1, round(discriminator_config.intermediate_size * width)))


class ReplacedTokenDetection(Objective):
    """ELECTRA's: see the module's notes. Trains an `ElectraPretraining`; saves the discriminator (an
    ElectraForPreTraining) as the model and the generator (an ElectraForMaskedLM) in generator/."""

    name = "rtd"
    recipe = ELECTRA_FULL_SENTENCES
    metric_names = ("generator_loss", "discriminator_loss", "generator_accuracy", "discriminator_accuracy",
                    "replaced_accuracy", "original_accuracy")
    progress = (("generator_accuracy", "gen_acc"), ("replaced_accuracy", "repl_acc"),
                ("original_accuracy", "orig_acc"))

    def build(self, arch: str, model_config, config) -> nn.Module:
        from bertcore.models.electra import ElectraForMaskedLM

        discriminator = super().build(arch, model_config, config)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed + 1)
            generator = ElectraForMaskedLM(generator_config(model_config, config.generator_width))
        return ElectraPretraining(discriminator, generator, config.discriminator_weight)

    def adopt(self, loaded: nn.Module, folder: Path, config) -> nn.Module:
        from bertcore.models.checkpoint import load_pretrained
        from bertcore.models.electra import ElectraForMaskedLM

        discriminator = super().adopt(loaded, folder, config)
        if (Path(folder) / GENERATOR_FOLDER).is_dir():
            generator, _ = load_pretrained(Path(folder) / GENERATOR_FOLDER)
            if not isinstance(generator, ElectraForMaskedLM):
                raise ValueError(f"{Path(folder) / GENERATOR_FOLDER} holds a {type(generator).__name__}; ELECTRA's "
                                 "generator is an ElectraForMaskedLM")
        else:  # a discriminator alone (e.g. a published one): a fresh generator of the configured width
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed + 1)
                generator = ElectraForMaskedLM(generator_config(discriminator.config, config.generator_width))
        return ElectraPretraining(discriminator, generator.train(), config.discriminator_weight)

    def published(self, model: nn.Module) -> nn.Module:
        return model.discriminator

    def write_model_files(self, model: nn.Module, tokenizer, folder: Path) -> None:
        from bertcore.models.checkpoint import write_pretrained_files

        write_pretrained_files(model.discriminator, tokenizer, folder)
        (folder / GENERATOR_FOLDER).mkdir(exist_ok=True)
        write_pretrained_files(model.generator, tokenizer, folder / GENERATOR_FOLDER)

    def sums(self, output: ReplacedTokenDetectionOutput, batch) -> torch.Tensor:
        """(generator loss·N, generator correct, N, discriminator loss·R, discriminator correct on replaced tokens,
        replaced, on original tokens, original), R = real tokens = replaced + original."""
        generator = _mlm_sums(output.generator_logits, batch.labels, output.generator_loss)
        real = batch.attention_mask.bool()
        says_replaced = output.discriminator_logits > 0  # (B, T)
        replaced, original = output.replaced, real & ~output.replaced
        right = says_replaced == output.replaced
        counts = [(right & replaced).sum(), replaced.sum(), (right & original).sum(), original.sum()]
        num_real = real.sum().float()
        return torch.stack([*generator, output.discriminator_loss.detach().float() * num_real,
                            *(count.float() for count in counts)])

    def metrics(self, sums: list[float]) -> dict[str, float]:
        generator_loss, generator_correct, masked, discriminator_loss, replaced_right, replaced, original_right, \
            original = sums
        return {"generator_loss": _ratio(generator_loss, masked),
                "discriminator_loss": _ratio(discriminator_loss, replaced + original),
                "generator_accuracy": _ratio(generator_correct, masked),
                "discriminator_accuracy": _ratio(replaced_right + original_right, replaced + original),
                "replaced_accuracy": _ratio(replaced_right, replaced),
                "original_accuracy": _ratio(original_right, original)}

    def __init__(self, discriminator_weight: float = 50.0):
        self.discriminator_weight = discriminator_weight

    def loss(self, sums: list[float]) -> float:
        metrics = self.metrics(sums)
        return metrics["generator_loss"] + self.discriminator_weight * metrics["discriminator_loss"]


OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (MaskedLmNextSentence, MaskedLm, MaskedLmSentenceOrder, ReplacedTokenDetection)}


def objective_for(name: str, config: Any = None) -> Objective:
    """The objective called `name` ("mlm+nsp", "mlm", "mlm+sop", "rtd"), set up from the run's config."""
    if name not in OBJECTIVE_CLASSES:
        raise ValueError(f"objective {name!r} is unknown; choose one of {', '.join(OBJECTIVE_CLASSES)}")
    if name == ReplacedTokenDetection.name and config is not None:
        return ReplacedTokenDetection(config.discriminator_weight)
    return OBJECTIVE_CLASSES[name]()


