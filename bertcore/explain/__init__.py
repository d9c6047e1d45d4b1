"""Why this prediction: attributions of one head's logit to the input positions (attribution.py), context mixing
through the layers (mixing.py), activation patching (patching.py) and how faithful each explanation is
(faithfulness.py), for every family and head bertcore loads. What is explained is a target (targets.py): a tuple
naming one logit of one head. Qt-free; results are numpy.
"""
