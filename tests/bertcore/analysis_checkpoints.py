"""Tiny random checkpoints of every family, built and saved with transformers beside a tokenizer of the family's
kind, for the tests of bertcore.analysis: each test loads the folder with bertcore and compares with the
transformers model that wrote it (eager attention, so that it returns attention probabilities).

Sizes are odd and distinct per family (tests/tiny_configs.py's habit), positions 128 (RoBERTa 130), so that EWT
sentences fit while the byte-level tokenizers, trained on a few hundred lines of Shakespeare, cut their words
into many pieces; a few long sentences do not fit, and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertcore.analysis.treebank import shipped_treebank
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.bertcore.test_tokenizer_families import save_albert, save_modernbert, save_roberta, save_xlm_roberta

# family -> (tokenizer kind, transformers model class)
FAMILIES = {
    "bert": ("wordpiece", "BertForPreTraining"),
    "roberta": ("roberta", "RobertaForMaskedLM"),
    "distilbert": ("wordpiece", "DistilBertForMaskedLM"),
    "electra": ("wordpiece", "ElectraForPreTraining"),  # the discriminator: no masked-LM head
    "electra-generator": ("wordpiece", "ElectraForMaskedLM"),
    "albert": ("albert", "AlbertForMaskedLM"),
    "xlm-roberta": ("xlm-roberta", "XLMRobertaForMaskedLM"),
    "modernbert": ("modernbert", "ModernBertForMaskedLM"),
}
WITHOUT_MLM_HEAD = {"electra"}


@dataclass(frozen=True)
class Checkpoint:
    name: str
    folder: Path
    reference: Any  # the transformers model, eval mode, eager attention
    reference_tokenizer: Any  # transformers.AutoTokenizer of the folder

    @property
    def has_mlm_head(self) -> bool:
        return self.name not in WITHOUT_MLM_HEAD

    def load(self):
        """(model, tokenizer) as bertcore loads the folder."""
        import bertcore

        return bertcore.load_pretrained(self.folder)


def save_wordpiece(folder: Path) -> None:
    """A WordPiece vocabulary of 600 trained on the shipped EWT dev cut's texts (uncased), saved as BERT's."""
    texts = [sentence.text or " ".join(sentence.words) for sentence in shipped_treebank("dev")]
    BertTokenizer.train(texts, vocab_size=600, lowercase=True, min_frequency=2).save(folder)


def _config(transformers, name: str, tokenizer) -> Any:
    vocab = len(tokenizer)
    specials = dict(pad_token_id=tokenizer.pad_token_id)
    eager = dict(attn_implementation="eager")
    if name == "bert":
        return transformers.BertConfig(vocab_size=vocab, hidden_size=30, num_hidden_layers=3, num_attention_heads=5,
                                       intermediate_size=37, max_position_embeddings=128, **specials, **eager)
    if name in ("roberta", "xlm-roberta"):
        kind = transformers.RobertaConfig if name == "roberta" else transformers.XLMRobertaConfig
        return kind(vocab_size=vocab, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                    intermediate_size=37, max_position_embeddings=130, type_vocab_size=1,
                    bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, **specials, **eager)
    if name == "distilbert":
        return transformers.DistilBertConfig(vocab_size=vocab, dim=32, n_layers=2, n_heads=4, hidden_dim=41,
                                             max_position_embeddings=128, **specials, **eager)
    if name in ("electra", "electra-generator"):
        return transformers.ElectraConfig(vocab_size=vocab, embedding_size=16, hidden_size=28, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=36, max_position_embeddings=128,
                                          **specials, **eager)
    if name == "albert":
        return transformers.AlbertConfig(vocab_size=vocab, embedding_size=10, hidden_size=24, num_hidden_layers=3,
                                         num_attention_heads=4, intermediate_size=35, max_position_embeddings=128,
                                         **specials, **eager)
    return transformers.ModernBertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                         intermediate_size=40, max_position_embeddings=128, local_attention=8,
                                         global_attn_every_n_layers=2, cls_token_id=tokenizer.cls_token_id,
                                         sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
                                         eos_token_id=tokenizer.sep_token_id, **specials, **eager)


def build_checkpoint(root: Path, name: str, transformers) -> Checkpoint:
    kind, class_name = FAMILIES[name]
    folder = root / name
    {"wordpiece": save_wordpiece, "roberta": lambda f: save_roberta(f, transformers),
     "albert": lambda f: save_albert(f, transformers), "xlm-roberta": lambda f: save_xlm_roberta(f, transformers),
     "modernbert": lambda f: save_modernbert(f, transformers)}[kind](folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        reference = getattr(transformers, class_name)(_config(transformers, name, tokenizer)).eval()
    reference.save_pretrained(folder)
    return Checkpoint(name, folder, reference, tokenizer)


_BUILT: dict[str, Checkpoint] = {}


def family_checkpoints(tmp_path_factory, transformers) -> dict[str, Checkpoint]:
    """Every family's checkpoint, built once per test session (under the session's temporary folder) and shared by
    the test modules of bertcore.analysis; each asks for it from a fixture of its own."""
    if not _BUILT:
        root = tmp_path_factory.mktemp("families")
        _BUILT.update({name: build_checkpoint(root, name, transformers) for name in FAMILIES})
    return _BUILT
