"""Demo fine-tuning tasks made from the built-in corpus (Tiny Shakespeare, public domain), offline and small.

    python -m bertcore.tasks.demos            # rewrites assets/tasks/ from assets/corpus/tinyshakespeare.txt

`registry` names the tasks and their files, `rules` reads each task's labels off the corpus by a fixed rule, `files`
writes the files and their README (a pure function of the corpus: a rerun writes the same bytes).
"""
