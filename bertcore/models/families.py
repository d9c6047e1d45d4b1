"""Which model families bertcore can load, and which class each config.json's `architectures` name loads as.

One entry per family in FAMILIES: its model_type (as config.json spells it), its config class, and its
architecture names (transformers' class names) mapped to bertcore's classes. Everything is named by import path
("module:Class") and imported only when asked for, so reading this module (the Hub browser, the app's menus)
never imports torch. Adding a family is adding one entry: this registry is the one place a family is named. The
loader (bertcore.models.checkpoint), `bertcore.models.hub.loader_supports`, the Hugging Face cache listing
(`supported_model_types`), `bert-train --arch` and the app's Train tab (`family_names`) ask it and nothing else,
and the order of its entries is the order a user is offered them in.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class UnsupportedModelError(ValueError):
    """A config.json naming a model_type or architecture that no family here loads; the message names both
    what was asked for and what is supported."""


@dataclass(frozen=True)
class Family:
    """A model family: a config class and the classes that its architecture names load as."""

    config: str  # "module:Class" of the config class; it must have from_dict(values)
    architectures: Mapping[str, str]  # transformers' class name -> "module:Class" that loads those weights
    default: str  # the architecture for a config.json that names none (an old or hand-written one)
    # Architecture names of this family that have no class here (e.g. BertForNextSentencePrediction) load as this
    # one, whose encoder is what every class of the family shares; None: such names are refused.
    fallback: str | None = None
    class_prefix: str = ""  # how the family's class names begin ("Bert"): says which unlisted names are its own
    aliases: tuple[str, ...] = field(default=())  # other model_type spellings of the same layout
    # Pretraining objective (bertcore.training.objectives) -> "module:Class" it trains and saves, the family's own
    # recipe first: what bert-train --arch accepts with each --objective.
    objectives: Mapping[str, str] = field(default_factory=dict)

    def config_class(self) -> type:
        return _resolve(self.config)

    def architecture_for(self, values: Mapping[str, Any]) -> str:
        """The architecture name a config.json's values pick: the first of `architectures`, else `default`;
        an unlisted name of this family maps to `fallback`. UnsupportedModelError for any other name."""
        name = _first_architecture(values) or self.default
        if name in self.architectures:
            return name
        if self.fallback is not None and self.class_prefix and name.startswith(self.class_prefix):
            return self.fallback
        raise UnsupportedModelError(
            f"config.json's architectures names {name!r}, which bertcore cannot load (model_type "
            f"{values.get('model_type')!r}); correct architectures in config.json. The supported architectures are "
            f"{', '.join(supported_architectures())}")

    def model_class(self, architecture: str) -> type:
        return _resolve(self.architectures[architecture])


_BERT = "bertcore.models.bert"
_TASK_HEADS = "bertcore.models.task_heads"
_ROBERTA = "bertcore.models.roberta"
_DISTILBERT = "bertcore.models.distilbert"

TASK_HEAD_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")


def _task_heads(prefix: str, module: str, class_prefix: str | None = None) -> dict[str, str]:
    """A family's three task classes (transformers' names -> ours), which every family has under one pattern."""
    return {prefix + suffix: f"{module}:{class_prefix or prefix}{suffix}" for suffix in TASK_HEAD_SUFFIXES}


# model_type -> Family. A bare encoder's name (BertModel) loads as the pretraining class, whose heads are then
# marked absent: the analyses need the wrapper's `.bert` and know to show no predictions.
FAMILIES: dict[str, Family] = {
    "bert": Family(
        config="bertcore.models.config:BertConfig",
        architectures={
            "BertForPreTraining": f"{_BERT}:BertForPreTraining",
            "BertModel": f"{_BERT}:BertForPreTraining",
            "BertForMaskedLM": f"{_BERT}:BertForMaskedLM",
            **_task_heads("Bert", _TASK_HEADS),
        },
        default="BertForPreTraining",
        fallback="BertForPreTraining",
        class_prefix="Bert",
        objectives={"mlm+nsp": f"{_BERT}:BertForPreTraining", "mlm": f"{_BERT}:BertForMaskedLM"},
    ),
    # XLM-RoBERTa is RoBERTa's layout with another vocabulary; a bare encoder loads as the MLM class, heads absent.
    "roberta": Family(
        config=f"{_ROBERTA}:RobertaConfig",
        architectures={
            "RobertaForMaskedLM": f"{_ROBERTA}:RobertaForMaskedLM",
            "RobertaModel": f"{_ROBERTA}:RobertaForMaskedLM",
            "XLMRobertaForMaskedLM": f"{_ROBERTA}:RobertaForMaskedLM",
            "XLMRobertaModel": f"{_ROBERTA}:RobertaForMaskedLM",
            **_task_heads("Roberta", _ROBERTA),
            **_task_heads("XLMRoberta", _ROBERTA, class_prefix="Roberta"),
        },
        default="RobertaForMaskedLM",
        class_prefix="Roberta",
        objectives={"mlm": f"{_ROBERTA}:RobertaForMaskedLM"},
        aliases=("xlm-roberta",),
    ),
    "distilbert": Family(
        config=f"{_DISTILBERT}:DistilBertConfig",
        architectures={
            "DistilBertForMaskedLM": f"{_DISTILBERT}:DistilBertForMaskedLM",
            "DistilBertModel": f"{_DISTILBERT}:DistilBertForMaskedLM",
            **_task_heads("DistilBert", _DISTILBERT),
        },
        default="DistilBertForMaskedLM",
        class_prefix="DistilBert",
        objectives={"mlm": f"{_DISTILBERT}:DistilBertForMaskedLM"},
    ),
    # The discriminator is the ELECTRA people fine-tune, so a bare or fine-tuned encoder loads as it.
    "electra": Family(
        config="bertcore.models.electra:ElectraConfig",
        architectures={
            "ElectraForPreTraining": "bertcore.models.electra:ElectraForPreTraining",
            "ElectraModel": "bertcore.models.electra:ElectraForPreTraining",
            "ElectraForMaskedLM": "bertcore.models.electra:ElectraForMaskedLM",
            **_task_heads("Electra", "bertcore.models.electra"),
        },
        default="ElectraForPreTraining",
        fallback="ElectraForPreTraining",
        class_prefix="Electra",
        # rtd trains a small ElectraForMaskedLM generator beside the discriminator, saved in generator/.
        objectives={"rtd": "bertcore.models.electra:ElectraForPreTraining",
                    "mlm": "bertcore.models.electra:ElectraForMaskedLM"},
    ),
    "albert": Family(
        config="bertcore.models.albert:AlbertConfig",
        architectures={
            "AlbertForPreTraining": "bertcore.models.albert:AlbertForPreTraining",
            "AlbertModel": "bertcore.models.albert:AlbertForPreTraining",
            "AlbertForMaskedLM": "bertcore.models.albert:AlbertForMaskedLM",
            **_task_heads("Albert", "bertcore.models.albert"),
        },
        default="AlbertForPreTraining",
        fallback="AlbertForPreTraining",
        class_prefix="Albert",
        objectives={"mlm+sop": "bertcore.models.albert:AlbertForPreTraining",
                    "mlm": "bertcore.models.albert:AlbertForMaskedLM"},
    ),
    "modernbert": Family(
        config="bertcore.models.modernbert:ModernBertConfig",
        architectures={
            "ModernBertForMaskedLM": "bertcore.models.modernbert:ModernBertForMaskedLM",
            "ModernBertModel": "bertcore.models.modernbert:ModernBertForMaskedLM",
            **_task_heads("ModernBert", "bertcore.models.modernbert"),
        },
        default="ModernBertForMaskedLM",
        fallback="ModernBertForMaskedLM",
        class_prefix="ModernBert",
        objectives={"mlm": "bertcore.models.modernbert:ModernBertForMaskedLM"},
    ),
}


def family_for(values: Mapping[str, Any]) -> Family:
    """The family of a config.json's values: by `model_type`; a config without one (the original Google
    bert_config.json) by its architecture's class prefix, else BERT. UnsupportedModelError naming the
    model_type and the supported ones otherwise."""
    model_type = values.get("model_type")
    if model_type is None:
        name = _first_architecture(values)
        for family in FAMILIES.values():
            if name is not None and family.class_prefix and name.startswith(family.class_prefix):
                return family
        return FAMILIES["bert"]
    for key, family in FAMILIES.items():
        if model_type == key or model_type in family.aliases:
            return family
    raise UnsupportedModelError(f"config.json's model_type is {model_type!r}, which bertcore cannot load; the "
                                f"supported model types are {', '.join(supported_model_types())}")


def resolve(values: Mapping[str, Any]) -> tuple[Family, str]:
    """(family, architecture name) for a config.json's values; UnsupportedModelError if either is not supported."""
    family = family_for(values)
    return family, family.architecture_for(values)


def supports(values: Mapping[str, Any]) -> bool:
    """Whether a config.json's values name a family and an architecture that bertcore loads."""
    try:
        resolve(values)
    except UnsupportedModelError:
        return False
    return True


def family_names() -> tuple[str, ...]:
    """Every family by its model_type, in the registry's order: what a new model's family is picked from
    (`bert-train --arch`, the app's Train tab)."""
    return tuple(FAMILIES)


def supported_model_types() -> tuple[str, ...]:
    """Every model_type a config.json may give, aliases included (the Hugging Face cache listing's filter)."""
    return tuple(name for key, family in FAMILIES.items() for name in (key, *family.aliases))


def pretraining_objectives(model_type: str) -> tuple[str, ...]:
    """The objectives a family can be pretrained with (its own first); () for a model_type of no family."""
    family = FAMILIES.get(model_type)
    return tuple(family.objectives) if family is not None else ()


def pretraining_class(model_type: str, objective: str) -> type:
    """The class `objective` trains for the family `model_type` (KeyError when it has none: check first with
    pretraining_objectives)."""
    return _resolve(FAMILIES[model_type].objectives[objective])


def supported_architectures() -> tuple[str, ...]:
    return tuple(name for family in FAMILIES.values() for name in family.architectures)


def base_model_name(model: Any) -> str:
    """The attribute of a loaded model that holds its encoder ("bert", "roberta", "distilbert", "electra",
    "albert", "model" for ModernBERT): the child module with the embeddings, which every class of a family
    shares and whose forward takes input_ids, token_type_ids, attention_mask, head_mask, output_attentions and
    output_hidden_states by keyword."""
    for name, child in model.named_children():
        if hasattr(child, "embeddings"):
            return name
    raise TypeError(f"{type(model).__name__} has no child module with embeddings; it is not a model of a family "
                    "bertcore loads")


def uses_segments(model: Any) -> bool:
    """Whether the model tells sentence A from B by a token-type (segment) embedding: a table of more than one row.
    RoBERTa's one row, DistilBERT and ModernBERT (none) read a pair only through its separators."""
    embeddings = getattr(getattr(model, base_model_name(model)), "embeddings", None)
    table = getattr(embeddings, "token_type_embeddings", None)
    return table is not None and table.num_embeddings > 1


def model_position_ids(model: Any, input_ids: Sequence[int]) -> list[int]:
    """The position ids the model itself gives one input: 0…T−1, or, for RoBERTa's embeddings (XLM-R's too, which
    keep a `padding_idx`), padding_idx + 1, + 2, … over the tokens that are not padding and padding_idx at padding."""
    embeddings = getattr(getattr(model, base_model_name(model)), "embeddings", None)
    padding_idx = getattr(embeddings, "padding_idx", None)
    if padding_idx is None:
        return list(range(len(input_ids)))
    positions, count = [], padding_idx
    for token_id in input_ids:
        count += token_id != padding_idx
        positions.append(count if token_id != padding_idx else padding_idx)
    return positions


def first_position_id(model: Any) -> int:
    """The position id the model gives a sequence's first token: 0, or padding_idx + 1 for RoBERTa's embeddings
    (its position table's first rows are never used)."""
    return model_position_ids(model, [-1])[0]  # -1: an id that is never the padding id


def _first_architecture(values: Mapping[str, Any]) -> str | None:
    """architectures' first name (a lone string counts as a list of one); None for none or a malformed value."""
    names = values.get("architectures")
    if isinstance(names, str):
        return names
    if isinstance(names, (list, tuple)) and names and isinstance(names[0], str):
        return names[0]
    return None


def _resolve(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
