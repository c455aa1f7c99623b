"""The ref-update rules of the git gateway, pure: the receive-pack head parsed (and refused
when malformed, whatever the bytes), what a session may push, and the report-status that
tells its git why not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.gitgate.push_rules import (
    FLUSH,
    MAX_HEAD,
    MalformedPush,
    PushHead,
    RefUpdate,
    parse_head,
    pkt_line,
    refusals,
    report_refused,
    summary,
)

OLD = "1" * 40
NEW = "2" * 40
ZERO = "0" * 40
BRANCH = "the-loop/issue-7"
CAPS = b"report-status side-band-64k agent=git/2.39.5"


def commands(*lines: str, caps: bytes = CAPS) -> bytes:
    out = []
    for index, line in enumerate(lines):
        payload = line.encode() + (b"\0" + caps if index == 0 else b"") + b"\n"
        out.append(pkt_line(payload))
    return b"".join(out) + FLUSH


def test_a_push_of_the_work_branch_parses_and_passes() -> None:
    body = commands(f"{OLD} {NEW} refs/heads/{BRANCH}") + b"PACK\x00\x00\x00\x02rest"
    head = parse_head(body)
    assert head == PushHead(
        (RefUpdate(OLD, NEW, f"refs/heads/{BRANCH}"),),
        frozenset({"report-status", "side-band-64k", "agent=git/2.39.5"}),
        body.index(b"PACK"),
    )
    assert refusals(head, BRANCH) == {}
    created = parse_head(commands(f"{ZERO} {NEW} refs/heads/{BRANCH}"))
    assert created is not None and refusals(created, BRANCH) == {}


def test_shallow_lines_and_sha256_names_are_understood() -> None:
    old, new = "a" * 64, "b" * 64
    body = pkt_line(f"shallow {'c' * 40}\n".encode()) + commands(f"{old} {new} refs/heads/x")
    head = parse_head(body)
    assert head is not None and [u.ref for u in head.updates] == ["refs/heads/x"]


def test_the_probe_before_a_large_push_updates_nothing() -> None:
    head = parse_head(b"0000")
    assert head == PushHead((), frozenset(), 4) and refusals(head, BRANCH) == {}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (f"{OLD} {NEW} refs/heads/main", f"a session may push only its work branch {BRANCH}"),
        (f"{OLD} {NEW} refs/heads/the-loop/issue-70", "may push only its work branch"),
        (f"{ZERO} {NEW} refs/tags/v1", "a session may not push tags"),
        (f"{OLD} {ZERO} refs/heads/{BRANCH}", "a session may not delete a ref"),
        (f"{OLD} {ZERO} refs/heads/other", "a session may not delete a ref"),
        (f"{OLD} {NEW} refs/notes/commits", "may push only its work branch"),
    ],
)
def test_anything_but_the_work_branch_is_refused(line: str, why: str) -> None:
    head = parse_head(commands(line))
    assert head is not None
    (reason,) = refusals(head, BRANCH).values()
    assert why in reason


def test_one_refused_ref_refuses_the_push_and_each_ref_says_why() -> None:
    head = parse_head(commands(f"{OLD} {NEW} refs/heads/{BRANCH}", f"{ZERO} {NEW} refs/tags/v1"))
    assert head is not None
    reasons = refusals(head, BRANCH)
    assert reasons == {"refs/tags/v1": "a session may not push tags"}
    text = summary(reasons)
    assert text == "the-loop refused this push: refs/tags/v1: a session may not push tags"
    answer = report_refused(head, reasons, text)
    # Side band: the summary on band 2 (git prints "remote: …"), the report on band 1.
    assert answer.startswith(pkt_line(b"\x02" + text.encode() + b"\n"))
    inner = pkt_line(b"unpack ok\n")
    inner += pkt_line(f"ng refs/heads/{BRANCH} refused with the rest of this push\n".encode())
    inner += pkt_line(b"ng refs/tags/v1 a session may not push tags\n") + FLUSH
    assert answer.endswith(pkt_line(b"\x01" + inner) + FLUSH)


def test_without_the_side_band_the_report_is_plain() -> None:
    head = parse_head(commands(f"{OLD} {NEW} refs/heads/main", caps=b"report-status"))
    assert head is not None
    answer = report_refused(head, refusals(head, BRANCH), "x")
    assert answer.startswith(b"000eunpack ok\n") and answer.endswith(FLUSH)
    assert b"ng refs/heads/main a session may push only" in answer


def test_no_work_branch_refuses_every_ref() -> None:
    head = parse_head(commands(f"{OLD} {NEW} refs/heads/{BRANCH}"))
    assert head is not None
    assert refusals(head, "") == {
        f"refs/heads/{BRANCH}": "this work item has no work branch to push"
    }


def test_a_head_that_has_not_all_arrived_asks_for_more() -> None:
    body = commands(f"{OLD} {NEW} refs/heads/{BRANCH}")
    for cut in range(len(body)):
        assert parse_head(body[:cut]) is None


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"zzzz", "four hex digits"),
        (b"+0x1", "four hex digits"),
        (b"0003", "length 3"),
        (b"0001", "length 1"),
        (pkt_line(b"hello\n") + FLUSH, "not a ref update"),
        (pkt_line(f"{OLD} {NEW}\n".encode()) + FLUSH, "not a ref update"),
        (pkt_line(f"{OLD[:39]} {NEW} refs/heads/x\n".encode()) + FLUSH, "not a ref update"),
        (pkt_line(f"{OLD} {'b' * 64} refs/heads/x\n".encode()) + FLUSH, "not a ref update"),
        (pkt_line(f"{OLD} {NEW} refs/heads/a b\n".encode()) + FLUSH, "not a ref update"),
        (pkt_line(f"{OLD} {NEW} HEAD\n".encode()) + FLUSH, "not a ref update"),
        (pkt_line(f"{OLD} {NEW} refs/heads/\u00e9\n".encode()) + FLUSH, "not ASCII"),
        (pkt_line(b"push-cert\0report-status\n") + FLUSH, "signed pushes"),
        (
            commands(f"{OLD} {NEW} refs/heads/a")[:-4]
            + pkt_line(f"{OLD} {NEW} refs/heads/b\0report-status\n".encode())
            + FLUSH,
            "only the first command",
        ),
    ],
)
def test_malformed_heads_are_refused(body: bytes, why: str) -> None:
    try:
        parse_head(body)
    except MalformedPush as exc:
        assert why in str(exc)
    else:
        pytest.fail(f"{body!r} was not refused")


def test_a_head_too_long_is_refused_before_it_ends() -> None:
    line = pkt_line(f"{OLD} {NEW} refs/heads/{'x' * 200}\n".encode())
    with pytest.raises(MalformedPush, match="more than"):
        parse_head(line * (MAX_HEAD // len(line) + 2))
    assert parse_head(b"fff0" + b"x" * 100) is None  # the longest pkt-line, still arriving


@given(st.binary(max_size=600))
def test_any_bytes_parse_or_are_refused(data: bytes) -> None:
    try:
        head = parse_head(data)
    except MalformedPush:
        return
    if head is not None:
        assert head.length <= len(data)
        for update in head.updates:
            assert update.ref.startswith("refs/")


@given(st.lists(st.sampled_from(["refs/heads/main", f"refs/heads/{BRANCH}", "refs/tags/t"])))
def test_only_pushes_of_the_work_branch_alone_pass(refs: list[str]) -> None:
    body = commands(*(f"{OLD} {NEW} {ref}" for ref in refs)) if refs else FLUSH
    head = parse_head(body)
    assert head is not None
    allowed = not refusals(head, BRANCH)
    assert allowed == all(ref == f"refs/heads/{BRANCH}" for ref in refs)
