"""The names of the masking recipes and what each does, in words: torch-free, so configs, `bert-train --help` and
the app's forms can offer and check them without loading the corruption itself (bertcore.data.masking)."""

from __future__ import annotations

# name -> one line for help texts and tooltips
RECIPE_DESCRIPTIONS = {
    "token": "BERT: single tokens picked at random",
    "whole-word": "every piece of a word picked together (BERT's whole-word masking)",
    "span": "SpanBERT: spans of whole words, lengths geometric (p = 0.2, at most 10 words, mean 3.8)",
}
MASKING_RECIPES = tuple(RECIPE_DESCRIPTIONS)


def check_recipe(recipe: object) -> str:
    """The recipe's name, or a ValueError that lists the ones there are."""
    if recipe not in MASKING_RECIPES:
        raise ValueError(f"masking recipe {recipe!r} is not one of {', '.join(MASKING_RECIPES)}: token is BERT's, "
                         "whole-word masks every piece of a word together, span is SpanBERT's")
    return str(recipe)
