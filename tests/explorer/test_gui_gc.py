"""Cycle collection happens only in the GUI thread once workers exist (else Qt objects die off-thread: abort)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from PySide6.QtCore import QObject

from explorer.common._qt.gui_gc import collect_garbage_in_gui_thread, freeze_long_lived
from tests.explorer.conftest import make_tiny_model

WAIT_MS = 30_000


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


@pytest.mark.parametrize(("gui_thread_only", "refused"), [(collect_garbage_in_gui_thread, None),
                                                          (freeze_long_lived, False)])
def test_only_the_gui_thread_can_install_it_or_freeze(qapp, gui_thread_only, refused):
    result = []
    worker = threading.Thread(target=lambda: result.append(gui_thread_only()))
    worker.start()
    worker.join()
    assert result == [refused]


@pytest.mark.slow
def test_a_model_installed_in_the_window_is_frozen_out_of_later_full_collections(qtbot, settings, tokenizer):
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    assert collect_garbage_in_gui_thread() is not None  # installed (and froze what existed) with the window
    model = make_tiny_model(tokenizer)  # made after that freeze, as a loaded model is
    model.vocabulary_tables = [[index] for index in range(50_000)]  # as big as what a real load brings
    gc.collect()
    walked_before, frozen_before = len(gc.get_objects()), gc.get_freeze_count()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(model, tokenizer, "tiny")
    gc.collect()
    walked_after = len(gc.get_objects())  # a full collection walks every generation but the frozen one
    assert walked_after < walked_before - 45_000  # the model's objects are no longer walked
    walked = {id(obj) for obj in gc.get_objects()}
    assert not any(id(table) in walked for table in model.vocabulary_tables)  # each of them frozen
    # (the freeze count alone can grow by less: a model frozen by an earlier test and let go here leaves it)
    assert gc.get_freeze_count() > frozen_before
    assert not gc.isenabled()  # still collected by the GUI thread's timer alone
    window.close()


def test_after_a_freeze_qt_objects_in_cycles_still_die_in_the_gui_thread_only(qtbot):
    collect_garbage_in_gui_thread()
    assert freeze_long_lived()
    assert not gc.isenabled()
    gui_thread, destroyed_in = threading.get_ident(), []
    holders = []
    for _ in range(20):
        node = Node()
        node.qt = QObject()
        node.qt.destroyed.connect(lambda *_: destroyed_in.append(threading.get_ident()))
        holders.append(node)
    del node

    def drop_and_allocate():
        holders.clear()  # every node is now cyclic garbage holding a QObject
        made = [Node() for _ in range(50 * gc.get_threshold()[0])]  # would start collections here
        del made

    worker = threading.Thread(target=drop_and_allocate)
    worker.start()
    worker.join()
    assert destroyed_in == []  # nothing collected in the worker
    qtbot.waitUntil(lambda: len(destroyed_in) == 20, timeout=5_000)
    assert set(destroyed_in) == {gui_thread}
