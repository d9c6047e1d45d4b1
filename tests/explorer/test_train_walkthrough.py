"""What a new user's walk through the Train tab found: each test holds one of the fixes."""

from __future__ import annotations

from explorer.runs.probe_history import ProbePair
from explorer.runs.snapshot_probe import SnapshotProber, WeightsJob


def test_a_roberta_run_probes_a_pair_longer_than_it_takes_truncated_as_the_inspector_does(tokenizer):
    from bertcore.analysis.inspection import max_input_length
    from bertcore.models.roberta import RobertaConfig
    from bertcore.models.task_heads import model_class_for

    config = RobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=48, max_position_embeddings=34)
    model = model_class_for(config)(config).eval()
    long_pair = ProbePair(" ".join(["the king is dead"] * 12), " ".join(["long live the queen"] * 12))
    shown = SnapshotProber()(WeightsJob(model.state_dict(), config, tokenizer, (long_pair,)))[long_pair]
    assert len(shown.input_ids) == max_input_length(config) == 32  # the position table's 34 less the padding offset
