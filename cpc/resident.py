"""Memory given back to the system: the C heap's free pages (glibc's ``malloc_trim``) and a file's mapped pages
(``madvise``).

Resident memory is what a laptop notices. Two kinds of it do no work: the
heap's free pages, which glibc keeps for the next burst of allocations (a
request frees rows of 262,144 logits, 1 MiB each), and the pages of a model
file whose weights llama.cpp has copied elsewhere. Both calls are glibc's
and Linux's; where the C library has no such call (macOS, musl) nothing is
given back and nothing fails.

    >>> give_back_free_heap(slack=1 << 62)
    False
    >>> release_mapped_pages("/no/such/file")
    0
"""

from __future__ import annotations

import ctypes
import os

_LIBC = ctypes.CDLL(None)
"""This process's C library (the symbols it has loaded)."""

_MADV_DONTNEED = 4


class _HeapInfo(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
    )]


_heap_info = getattr(_LIBC, "mallinfo2", None)
_trim = getattr(_LIBC, "malloc_trim", None)
_madvise = getattr(_LIBC, "madvise", None)
if _heap_info is not None:
    _heap_info.restype = _HeapInfo


def give_back_free_heap(slack: int = 0) -> bool:
    """Give the heap's free pages back to the system where it holds more than ``slack`` free bytes; whether
    it did. A glibc older than 2.33 has no ``mallinfo2`` to tell the free bytes: there the heap is trimmed
    only when no slack is asked (a trim after every answer would cost each keystroke page faults).

        >>> give_back_free_heap() in (True, False)
        True
    """
    if _trim is None:
        return False
    if _heap_info is None:  # the free bytes are unknown
        if slack:
            return False
    elif _heap_info().fordblks <= slack:
        return False
    _trim(0)
    return True


def release_mapped_pages(path: os.PathLike | str) -> int:
    """Let go of this process's pages of the file at ``path``; returns the bytes of mapping advised.

    llama.cpp reads every weight through its mapping of the model file, and
    copies some elsewhere: repacked for this CPU's matrix code (13 MB of the
    default model), or onto a GPU (all of them). The copied weights' pages
    would stay resident without ever being read again. Let go, a page is
    read again from the system's file cache at its first use: the weights
    the CPU computes with come back, the copied ones stay out.

        >>> release_mapped_pages("/no/such/file")
        0
    """
    if _madvise is None:
        return 0
    target = os.path.realpath(path)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            ranges = [line.split(maxsplit=5) for line in maps]
    except OSError:
        return 0
    advised = 0
    for fields in ranges:
        if len(fields) < 6 or fields[5].rstrip("\n") != target:
            continue
        start, end = (int(address, 16) for address in fields[0].split("-"))
        if _madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED) == 0:
            advised += end - start
    return advised
