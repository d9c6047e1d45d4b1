"""The Fine-tune tab on a model of another family: the loaded ELECTRA discriminator (or an ALBERT folder) is
fine-tuned through the tab's Finetuner into the family's own sequence head, which loads back as that class."""

import pytest
import torch

from bertcore.models.albert import AlbertConfig, AlbertForPreTraining, AlbertForSequenceClassification
from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.models.electra import ElectraConfig, ElectraForPreTraining, ElectraForSequenceClassification
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from explorer.finetune.finetune_run import LOADED_START
from explorer.window.startup import load_checkpoint
from tests.bertcore.test_finetune import WORDS
from tests.explorer.test_finetune_panel import keyword_task, panel, run_to_end, tiny  # noqa: F401 (two fixtures)

SIZES = dict(hidden_size=24, embedding_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
             max_position_embeddings=32)


def family_folder(tmp_path, model_class, config_class):
    tokenizer = BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_class(config_class(vocab_size=tokenizer.vocab_size, **SIZES))
    return save_pretrained(model, tokenizer, tmp_path / model_class.__name__)


@pytest.mark.slow
def test_the_loaded_electra_is_fine_tuned_into_its_own_head(qtbot, panel, keyword_task, tmp_path):  # noqa: F811
    folder = family_folder(tmp_path, ElectraForPreTraining, ElectraConfig)
    panel.on_model_changed(load_checkpoint(folder))
    settings = tiny(folder, keyword_task, tmp_path / "run", init_from=LOADED_START, steps=4, checkpoint_every=0,
                    eval_every=4)
    assert run_to_end(qtbot, panel, settings) == "finished"
    model, _ = load_pretrained(tmp_path / "run" / "final")
    assert type(model) is ElectraForSequenceClassification and model.config.architectures == (
        "ElectraForSequenceClassification",)


@pytest.mark.slow
def test_an_albert_folder_is_fine_tuned_into_its_own_head(qtbot, panel, keyword_task, tmp_path):  # noqa: F811
    folder = family_folder(tmp_path, AlbertForPreTraining, AlbertConfig)
    settings = tiny(folder, keyword_task, tmp_path / "run", steps=4, checkpoint_every=0, eval_every=4)
    assert run_to_end(qtbot, panel, settings) == "finished"
    model, _ = load_pretrained(tmp_path / "run" / "final")
    assert type(model) is AlbertForSequenceClassification
