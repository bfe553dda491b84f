"""Memory given back to the system: the heap is trimmed past its slack, and where glibc cannot tell the free
bytes (older than 2.33) only when no slack is asked."""

from __future__ import annotations

import cpc.resident as resident


def _trims(monkeypatch, free: int | None) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(resident, "_trim", lambda pad: calls.append(pad) or 1)
    if free is None:
        monkeypatch.setattr(resident, "_heap_info", None)
    else:
        monkeypatch.setattr(resident, "_heap_info", lambda: resident._HeapInfo(fordblks=free))
    return calls


def test_the_heap_is_trimmed_past_its_slack_only(monkeypatch):
    calls = _trims(monkeypatch, free=40 << 20)
    assert not resident.give_back_free_heap(slack=64 << 20) and calls == []
    assert resident.give_back_free_heap(slack=32 << 20) and calls == [0]


def test_without_mallinfo2_the_heap_is_trimmed_when_no_slack_is_asked(monkeypatch):
    calls = _trims(monkeypatch, free=None)
    assert not resident.give_back_free_heap(slack=32 << 20) and calls == []
    assert resident.give_back_free_heap() and calls == [0]
