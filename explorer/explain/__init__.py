"""The Explain tab: why the model gave an output (attributions, context mixing, activation patching)."""
