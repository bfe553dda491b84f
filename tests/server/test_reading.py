"""The order of work on the engine's worker: a completion request goes before other documents' corpus updates.

`lsp_server.reading.CorpusFeeder` on a real one-thread executor, with a
session that records what it is asked in order (the point of the test is the
order, not the counting, which tests/engine/test_fusion.py checks).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from lsp_server.reading import CorpusFeeder


class RecordingSession:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def update_document(self, key: str, text: str) -> None:
        self.calls.append(("update", key))

    def forget(self, key: str) -> None:
        pass

    def close_document(self, key: str) -> None:
        self.calls.append(("close", key))


def drain(feeder: CorpusFeeder, worker: ThreadPoolExecutor) -> None:
    """Wait until the feeder's updates are done (some put themselves back in the queue), then stop the worker."""
    deadline = time.monotonic() + 10
    while feeder.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.shutdown(wait=True)


def feeder_with(session: RecordingSession, worker: ThreadPoolExecutor, texts: dict[str, str],
                waiting_in: list[str]) -> CorpusFeeder:
    workspace = SimpleNamespace(text_documents={uri: SimpleNamespace(source=text) for uri, text in texts.items()})
    return CorpusFeeder(
        session, worker, lambda: workspace, lambda: None, model_ready=lambda: True,
        progress_bar=lambda title: None, log_line=lambda line: None,
        request_waits_elsewhere=lambda uri: bool(waiting_in) and waiting_in[0] != uri,
    )


def test_a_request_goes_before_the_updates_of_other_documents():
    """Many documents opened at once (a session restored), then a key in one of them: its own update, then
    its request, then the others' updates. Before, the request waited for every update (3.2 s for 30 files)."""
    session, worker = RecordingSession(), ThreadPoolExecutor(max_workers=1)
    uris = [f"file:///{name}.py" for name in "abcde"]
    waiting_in: list[str] = []
    feeder = feeder_with(session, worker, dict.fromkeys(uris, "x = 1\n"), waiting_in)
    gate = threading.Event()
    worker.submit(gate.wait)  # the worker busy while the editor opens the documents and asks
    for uri in uris:
        feeder.queue_document(uri)
    waiting_in.append(uris[-1])

    def completion() -> None:
        session.calls.append(("complete", waiting_in.pop()))

    worker.submit(completion)
    gate.set()
    drain(feeder, worker)
    assert session.calls == [("update", uris[-1]), ("complete", uris[-1])] + [("update", uri) for uri in uris[:-1]]


def test_with_no_request_waiting_updates_keep_their_order_and_the_newest_text():
    session, worker = RecordingSession(), ThreadPoolExecutor(max_workers=1)
    texts = {"file:///a.py": "a = 1\n", "file:///b.py": "b = 1\n"}
    feeder = feeder_with(session, worker, texts, [])
    gate = threading.Event()
    worker.submit(gate.wait)
    feeder.queue_document("file:///a.py")
    feeder.queue_document("file:///b.py")
    texts_seen = []
    session.update_document = lambda key, text: texts_seen.append((key, text))
    feeder.workspace().text_documents["file:///a.py"].source = "a = 2\n"
    feeder.queue_document("file:///a.py")  # coalesced: one update, the newest text
    gate.set()
    drain(feeder, worker)
    assert texts_seen == [("file:///a.py", "a = 2\n"), ("file:///b.py", "b = 1\n")]
