"""Cycle collection happens only in the GUI thread once workers exist (else Qt objects die off-thread: abort)."""

from __future__ import annotations

import gc
import threading
import weakref

from explorer._qt.gui_gc import collect_garbage_in_gui_thread


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cycle collector frees it


def test_workers_never_collect_and_the_gui_thread_does(qtbot):
    collector = collect_garbage_in_gui_thread()
    assert collector is not None and collect_garbage_in_gui_thread() is collector  # once per application
    assert not gc.isenabled()
    collecting_threads = []

    def record(phase, info):
        if phase == "start":
            collecting_threads.append(threading.get_ident())

    def make_garbage(refs):
        nodes = [Node() for _ in range(50 * gc.get_threshold()[0])]  # the automatic collector: ~50 runs here
        refs.append(weakref.ref(nodes[0]))

    refs = []
    gc.callbacks.append(record)
    try:
        worker = threading.Thread(target=make_garbage, args=(refs,))
        worker.start()
        worker.join()
        assert collecting_threads == [] and refs[0]() is not None  # garbage, still there
        qtbot.waitUntil(lambda: refs[0]() is None, timeout=5_000)
    finally:
        gc.callbacks.remove(record)
    assert set(collecting_threads) == {threading.get_ident()}


def test_only_the_gui_thread_can_install_it(qapp):
    result = []
    worker = threading.Thread(target=lambda: result.append(collect_garbage_in_gui_thread()))
    worker.start()
    worker.join()
    assert result == [None]
