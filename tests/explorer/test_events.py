"""The plain observer the app's state announces changes through (explorer.common.events), headless."""

from __future__ import annotations

import gc

import pytest

from explorer.common.events import Event


class View:
    def __init__(self, seen: list):
        self.seen = seen

    def show(self, *args):
        self.seen.append(args)


def test_emit_calls_every_callback_in_connection_order_with_its_arguments():
    event, seen = Event(), []
    event.connect(lambda *args: seen.append(("first", args)))
    event.connect(lambda *args: seen.append(("second", args)))
    event.emit(3, "x")
    assert seen == [("first", (3, "x")), ("second", (3, "x"))]


def test_a_callback_connected_twice_is_called_once_and_disconnect_stops_it():
    event, seen = Event(), []
    view = View(seen)
    event.connect(view.show)
    event.connect(view.show)
    event.emit(1)
    event.disconnect(view.show)
    event.emit(2)
    event.disconnect(view.show)  # again: passed over
    assert seen == [(1,)]


def test_a_bound_method_is_held_weakly_and_dropped_once_its_object_goes():
    event, seen = Event(), []
    view = View(seen)
    event.connect(view.show)
    event.emit("before")
    del view
    gc.collect()
    event.emit("after")
    assert seen == [("before",)] and event.callbacks() == []


def test_a_function_is_held_strongly():
    event, seen = Event(), []
    event.connect(lambda value: seen.append(value))  # nothing else holds it
    gc.collect()
    event.emit(5)
    assert seen == [5]


def test_disconnecting_during_emit_takes_effect_from_the_next_emit():
    event, seen = Event(), []

    def first(value):
        seen.append(("first", value))
        event.disconnect(second)

    def second(value):
        seen.append(("second", value))

    event.connect(first)
    event.connect(second)
    event.emit(1)
    event.emit(2)
    assert seen == [("first", 1), ("second", 1), ("first", 2)]


def test_connecting_what_cannot_be_called_says_so():
    with pytest.raises(TypeError, match="takes a callable"):
        Event().connect("not a function")
