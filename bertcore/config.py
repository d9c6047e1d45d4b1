"""The model configuration: the standard BERT `config.json` fields, validated, plus named presets.

The presets follow the BERT miniatures of Turc et al. 2019 ("Well-Read Students Learn Better"):
tiny L2/H128, mini L4/H256, small L4/H512, medium L8/H512, base L12/H768 (heads = H/64, FFN = 4H).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu")


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522  # WordPiece vocabulary size; the MLM decoder predicts over it
    hidden_size: int = 768  # width of every token vector in the residual stream
    num_hidden_layers: int = 12  # encoder layers
    num_attention_heads: int = 12  # heads per layer; each is hidden_size / num_attention_heads wide
    intermediate_size: int = 3072  # feed-forward inner width (4 × hidden in the paper)
    hidden_act: str = "gelu"  # feed-forward and MLM-transform activation ("gelu" is the exact erf form)
    hidden_dropout_prob: float = 0.1  # dropout on embeddings and on every sublayer output
    attention_probs_dropout_prob: float = 0.1  # dropout on the attention probabilities
    max_position_embeddings: int = 512  # learned positions: the longest input the model accepts
    type_vocab_size: int = 2  # segment embeddings: sentence A and sentence B
    layer_norm_eps: float = 1e-12  # LayerNorm epsilon (BERT uses 1e-12)
    initializer_range: float = 0.02  # std of the normal init of weights
    pad_token_id: int = 0  # id of [PAD]; its embedding is never trained

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}; choose a head count that divides it "
                f"(e.g. {_divisors_hint(self.hidden_size)})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r} is not supported; use one of {', '.join(ACTIVATIONS)}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes: Any) -> BertConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {"architectures": ["BertForPreTraining"], "model_type": "bert", **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> BertConfig:
        """Keeps the fields BERT defines and ignores the rest (transformers adds many of its own)."""
        if values.get("model_type", "bert") != "bert":
            raise ValueError(f"model_type is {values['model_type']!r}; only BERT checkpoints ('bert') are supported")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"position_embedding_type {values['position_embedding_type']!r} is not supported; "
                "this BERT has learned absolute positions"
            )
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})

    def to_json_file(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def from_json_file(cls, path: str | Path) -> BertConfig:
        path = Path(path)
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} does not exist; a BERT checkpoint needs a config.json") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path} is not valid JSON ({error}); the config file is corrupt") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path} holds a {type(values).__name__}, not a JSON object of config fields")
        return cls.from_dict(values)


def _divisors_hint(hidden_size: int) -> str:
    return ", ".join(str(d) for d in range(1, min(hidden_size, 16) + 1) if hidden_size % d == 0)


def _miniature(layers: int, hidden: int) -> BertConfig:
    return BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
    )


PRESETS: dict[str, BertConfig] = {
    "tiny": _miniature(2, 128),
    "mini": _miniature(4, 256),
    "small": _miniature(4, 512),
    "medium": _miniature(8, 512),
    "base": _miniature(12, 768),
}


def preset(name: str, **overrides: Any) -> BertConfig:
    """A named BERT miniature, optionally with some fields changed (e.g. `vocab_size=8000`)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name].replace(**overrides)
