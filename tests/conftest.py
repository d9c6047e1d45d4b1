import os

# Tests run headless (CI has no display): Qt must render offscreen before any Qt import.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Prepared corpora (bertcore.data.prepare) go to a temporary cache, never to the user's ~/.cache.
if not os.environ.get("BERT_EXPLORER_DATA_CACHE"):
    import tempfile

    os.environ["BERT_EXPLORER_DATA_CACHE"] = tempfile.mkdtemp(prefix="bert-tests-corpora-")
