"""bertcore: BERT from scratch in PyTorch, matching HuggingFace transformers to 1e-5, with its tokenizer, BERT's
masking, inspection of everything a forward pass computes, and one resumable training loop for pretraining and
fine-tuning (classification, tagging, extractive QA). Qt-free.

    import bertcore

    model, tokenizer = bertcore.load_pretrained("path/to/bert-folder")   # config.json + safetensors + vocab.txt
    encoding = tokenizer.encode("The cat sat on the mat.", "It purred.")
    inspection = bertcore.inspect_encoding(model, tokenizer, encoding,
                                           masking=bertcore.mask_like_bert(encoding, tokenizer, seed=0))

    with bertcore.Trainer(bertcore.TrainingConfig(preset="mini", steps=2000, out_dir="runs/demo")) as trainer:
        for stats in trainer.steps():
            print(stats.step, stats.loss)

    with bertcore.Finetuner(bertcore.FinetuneConfig.for_demo("mood", out_dir="runs/mood")) as finetuner:
        for stats in finetuner.steps():
            print(stats.step, stats.loss, stats.eval and stats.eval.metrics)

The names below are imported on first use (PEP 562), so `import bertcore` and its torch-free modules
(the configs, `bertcore.files.run_folder`, `bertcore.errors`, `bertcore.files.atomic`) do not import torch: a GUI
or `bert-train --help` starts fast. Submodules are reachable as attributes too (`bertcore.training.pretraining`).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from typing import Any

__version__ = "0.1.0"  # the one place the project's version is written (pyproject.toml and the app read it)

# Public name -> the module that defines it. Adding a name to the package is one line here.
_EXPORTS = {
    "BertConfig": "bertcore.models.config",
    "TrainingConfig": "bertcore.training.settings",
    "LoopSettings": "bertcore.training.settings",  # the settings every run shares, each with its help
    "preset": "bertcore.models.config",
    "BertModel": "bertcore.models.bert",
    "BertForPreTraining": "bertcore.models.bert",
    "BertForSequenceClassification": "bertcore.models.task_heads",
    "BertForTokenClassification": "bertcore.models.task_heads",
    "BertForQuestionAnswering": "bertcore.models.task_heads",
    "start_from_pretrained": "bertcore.models.task_heads",
    "BertTokenizer": "bertcore.tokenization.wordpiece",
    "PretrainedTokenizer": "bertcore.tokenization.pretrained",
    "tokenizer_from_folder": "bertcore.tokenization.pretrained",
    "mask_like_bert": "bertcore.data.masking",
    "load_pretrained": "bertcore.models.checkpoint",
    "save_pretrained": "bertcore.models.checkpoint",
    "inspect": "bertcore.analysis.inspection",
    "inspect_encoding": "bertcore.analysis.inspection",
    "Trainer": "bertcore.training.pretraining",
    "CheckpointError": "bertcore.errors",
    "TrainingError": "bertcore.errors",
    "TokenizerError": "bertcore.errors",
    "CorpusError": "bertcore.errors",
    "TaskDataError": "bertcore.errors",
    # a corpus of any size and format, prepared once into memory-mapped token ids and cached (bertcore.data.prepare)
    "CorpusSource": "bertcore.data.sources",
    "prepare_corpus": "bertcore.data.prepare",
    "PreparedCorpus": "bertcore.data.prepared",
    # fine-tuning data in the formats people have, and the metrics as the field defines them
    "load_finetuning_data": "bertcore.tasks.finetune_data",
    "demo_task": "bertcore.tasks.demos.registry",
    "postprocess_qa_predictions": "bertcore.tasks.qa",
    # fine-tuning on the pretraining loop's machinery, and what a fine-tuned model says about an input
    "FinetuneConfig": "bertcore.training.settings",
    "Finetuner": "bertcore.training.finetuning",
    "TaskStepStats": "bertcore.training.finetuning",
    "TaskEvalStats": "bertcore.training.finetuning",
    "read_checkpoint": "bertcore.models.checkpoint",
    "model_class_for": "bertcore.models.task_heads",
    "task_model_class": "bertcore.models.task_heads",  # a family's task head class: RobertaForTokenClassification…
    "TrainingLoop": "bertcore.training.loop",
    "TrainingTask": "bertcore.training.task",
    # the head lab: which heads matter, what each does, where a prediction forms, what the embeddings learned
    "head_importance": "bertcore.analysis.importance",
    "normalize_importance": "bertcore.analysis.importance",
    "input_head_importance": "bertcore.analysis.importance",
    "pruning_curve": "bertcore.analysis.pruning",
    "head_roles": "bertcore.analysis.roles",
    "logit_lens": "bertcore.analysis.lens",
    "position_similarity": "bertcore.analysis.embedding_views",
    "nearest_neighbours": "bertcore.analysis.embedding_views",
    "project_hidden_states": "bertcore.analysis.embedding_views",
    # what changed between two checkpoints (e.g. before and after fine-tuning), head by head
    "attention_change": "bertcore.analysis.attention_change",
    "attribute": "bertcore.explain.attribution",
    "context_mixing": "bertcore.explain.mixing",
    "activation_patching": "bertcore.explain.patching",
    "faithfulness": "bertcore.explain.faithfulness",
    # every BERT a user has: the families the loader reads (bertcore.models.families) and their classes
    "BertForMaskedLM": "bertcore.models.bert",
    "RobertaConfig": "bertcore.models.roberta",
    "RobertaModel": "bertcore.models.roberta",
    "RobertaForMaskedLM": "bertcore.models.roberta",
    "DistilBertConfig": "bertcore.models.distilbert",
    "DistilBertModel": "bertcore.models.distilbert",
    "DistilBertForMaskedLM": "bertcore.models.distilbert",
    # what a model has learned of language: syntax in its heads, what each layer knows, how it scores sentences, how
    # healthy its representations are (bertcore.analysis), and all of it as one record for a training run
    "read_conllu": "bertcore.analysis.treebank",
    "syntactic_attention": "bertcore.analysis.syntax",
    "pseudo_log_likelihood": "bertcore.analysis.likelihood",
    "read_blimp": "bertcore.analysis.likelihood",
    "blimp": "bertcore.analysis.likelihood",
    "probe_layers": "bertcore.analysis.probes",
    "structural_probe": "bertcore.analysis.probes",
    "representation_health": "bertcore.analysis.health",
    "analysis_record": "bertcore.analysis.records",
    # how alike two models' representations are, layer by layer (linear CKA over the same words)
    "linear_cka": "bertcore.analysis.similarity",
    "representation_similarity": "bertcore.analysis.similarity",
    # a training run's records: read back, or made afterwards from its checkpoints
    "read_analysis_records": "bertcore.analysis.run_analysis",
    "analyse_checkpoints": "bertcore.analysis.run_analysis",
    "AnalysisSchedule": "bertcore.analysis.schedule",  # the records of a run as it trains (Trainer(analysis=...))
    "RecordSettings": "bertcore.analysis.records",
    "AnalysisError": "bertcore.errors",
    "LinguisticDataError": "bertcore.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value  # found once; later lookups do not come here
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # a submodule, e.g. bertcore.training.pretraining
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    submodules = [module.name for module in pkgutil.iter_modules(__path__)]
    return sorted({*__all__, *submodules})
