"""Training runs as the app sees them: the Train and Fine-tune tabs' runs, and the Runs tab's curves.

The front door for a run's curves, Qt-free (`explorer.runs.curve_files`, `explorer.runs.smoothing`):

    read_curves(path)       metric name -> Curve (.steps, .values, .wall_times, every point) of a bert-train /
                            bert-finetune run folder, a Hugging Face Trainer output folder or a TensorBoard log
    smooth(values, weight)  TensorBoard's smoothing, exactly
"""

from explorer.runs.curve_files import Curve, CurveReadError, RunCurves, find_runs, open_run, read_curves
from explorer.runs.smoothing import smooth

__all__ = ["Curve", "CurveReadError", "RunCurves", "find_runs", "open_run", "read_curves", "smooth"]
