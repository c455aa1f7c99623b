"""The git gateway's request caps and a streamed body's clock, as bookkeeping (the served App
under trickling git requests is in test_git_limits)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from app.ingress.doors import BodyClock, BodyCut
from app.ingress.slots import Slots
from app.ingress.wsgi_body import IdleInput


def test_a_holder_gets_its_share_and_the_total_caps_everyone():
    slots = Slots(total=3, each=2)
    assert slots.take("a") is None and slots.take("a") is None
    assert slots.take("a") == "holder"  # its share is taken; the others' is not
    assert slots.take("b") is None
    assert slots.take("c") == "total"
    slots.give("a")
    assert slots.take("c") is None
    assert slots.take("a") == "total"


def test_a_slot_given_back_is_free_again_and_a_stray_give_changes_nothing():
    slots = Slots(total=2, each=1)
    assert slots.take("a") is None
    slots.give("a")
    slots.give("a")  # already given back
    slots.give("nobody")
    assert slots.in_use == 0 and slots.taken == {}
    assert slots.take("a") is None and slots.take("b") is None


def test_a_cap_is_a_positive_number():
    with pytest.raises(ValueError, match="positive"):
        Slots(total=0, each=1)


def test_the_body_clock_waits_for_the_idle_gap_then_for_what_is_left_of_the_deadline():
    now = [100.0]
    clock = BodyClock(seconds=10, idle=3, clock=lambda: now[0])
    assert clock.wait() == 3
    assert "no byte of the body came for 3 seconds" in str(clock.cut())
    now[0] = 108.0  # two seconds of the deadline left: less than the idle gap
    assert clock.wait() == 2
    assert str(clock.cut()) == "the body did not arrive in time" and clock.cut().status == 408
    now[0] = 111.0
    assert clock.wait() == 0


def test_a_body_that_trickles_inside_each_idle_gap_is_still_cut_at_its_deadline():
    """A server's read loops until it has what it was asked for (as gunicorn's does); a
    client that sends a byte just inside each idle gap is cut once the whole body is late."""
    server, client = socket.socketpair()
    alive = threading.Event()
    alive.set()

    def trickle() -> None:
        while alive.is_set():
            with contextlib.suppress(OSError):
                client.sendall(b"x")
            time.sleep(0.1)

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    body = IdleInput(server.makefile("rb"), server, BodyClock(seconds=1, idle=0.5), guard=True)
    try:
        with pytest.raises(BodyCut, match="did not arrive in time") as cut:
            body.read(64 * 1024)  # never whole: a byte every 0.1 s
        assert cut.value.status == 408
    finally:
        alive.clear()
        sender.join(timeout=10)
        body.close()
        server.close()
        client.close()
