"""The Runs tab's plain layer: every run a user has, from bert-train, bert-finetune, the Hugging Face Trainer and
TensorBoard, on one set of axes. `follower` finds and tails the runs off the GUI thread, `run_facts` reads what a
run's folder says of it, `state` is the evented state the views render, and `overlay` turns a curve into what a plot
draws. The Qt views are in explorer.runs._qt.workbench."""
