"""Work off the GUI thread, in one idiom for its three kinds, a module each.

- `generator.GeneratorWorker`: iterates a step generator (a training run); every `yield` is a point where the run
  can be paused or stopped.
- `latest_job.LatestJobWorker`: computes the newest job submitted (an inspection, a probe snapshot); a job submitted
  while another is computed replaces the one waiting, so nothing queues up.
- `one_shot.OneShotWorker`: runs one function once (loading or saving a model).

The idiom, after superqt's `thread_worker` and Orange's `concurrent` helpers: the work is a plain generator
or function; a stop request is a flag (a thread is never killed); what comes back crosses a signal as plain
Python / numpy values or frozen dataclasses of them, and a failure as an `explorer.common.failure.Failure`, never as
the exception itself. Each starts its thread through `threads.make_worker_thread`. The thread rules below each
fixed a crash or a stall (see `git log`):

1. The worker objects stay in the GUI thread; only a small `_ThreadEntry` moves to the worker thread and
   runs the work there. Qt delivers a signal to a plain Python callable (a lambda, pytest-qt's
   `waitSignal`) in the thread the *sender* belongs to, so a worker moved to its thread would run such
   callables there: a QTimer stopped from that thread is left dangling and crashes the GUI thread later.
2. Python's cycle collector runs only in the GUI thread once a worker thread exists (`gui_gc`): a Qt
   object collected in a worker thread aborts the process. Every worker installs that collector, from the
   GUI thread, before its thread starts.
3. A thread is kept before it is started: work that fails at once ends (and reads the thread) before
   `start()` returns.
4. torch's intra-op thread count is per calling thread (OpenMP keeps it per thread), so each worker sets
   its own and the rest of the process keeps its count. Training leaves a core to the GUI on small
   machines; probes use one thread; an inspection uses one below a size (see
   `explorer.inspector.inspection_threads`).
5. Training and probe threads are niced (Linux: per thread), so the GUI thread wins the CPU and a repaint
   never waits behind a training step.
6. The GUI never starts new work from a `finished` slot (queue it with a zero-delay timer instead), and a
   window shuts its workers down (stop, then join) before it closes: a QThread destroyed while its thread
   still runs aborts the process.
"""
