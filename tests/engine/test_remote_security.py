"""The client's key and TLS, against a real llama-server started with ``--api-key``, and a real TLS endpoint
(a certificate authority made in the test) in front of it."""

from __future__ import annotations

import pytest

from cpc.engine import Engine
from cpc.generate import Options, generate
from cpc.remote import API_KEY_ENV, RemoteOptions, RemoteRefused, RemoteUnavailable
from harness.llama_server import LlamaServer
from tests.support.tls_proxy import TLSProxy

pytestmark = pytest.mark.slow

KEY = "team-key-8d3f0c2b7a"
WRONG = "not-the-key-51e9aa04"
PROMPT = "def area(width, height):\n    return width *"


@pytest.fixture(scope="module")
def server():
    with LlamaServer("default", api_key=KEY) as running:
        yield running


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch):
    """Each test names its key: one in the environment of the test run would be taken as the default."""
    monkeypatch.delenv(API_KEY_ENV, raising=False)


def engine(url: str, **options) -> Engine:
    return Engine.load(url, remote=RemoteOptions(**{"timeout_s": 60.0} | options))


def next_token(served: Engine) -> int:
    state = served.tokenizer.encode(PROMPT.encode())
    return int(served.lm.greedy_next([served.lm.bos + tuple(state)], served.vocab.special.copy())[0][0])


def test_the_key_comes_from_the_environment_and_no_repr_shows_it(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, KEY)
    options = RemoteOptions()
    assert options.api_key == KEY and KEY not in repr(options)


def test_the_right_key_serves(server):
    served = engine(server.url, api_key=KEY)
    assert served.lm.last_error is None
    assert served.vocab.decode([next_token(served)]) == b" height"


@pytest.mark.parametrize("key", [WRONG, None], ids=["wrong key", "no key"])
def test_a_refused_key_is_said_clearly_once_and_nothing_more_is_asked(server, key):
    served = engine(server.url, api_key=key)  # the load goes on: the vocabulary is local
    message = served.lm.last_error
    assert message is not None and "HTTP 401" in message and API_KEY_ENV in message
    assert ("refused this client's key" if key else "refused requests without a key") in message
    assert WRONG not in message and KEY not in message
    asked = served.lm.profile.requests
    for _ in range(3):  # keystrokes: each gets the refusal at once, and the server hears nothing
        with pytest.raises(RemoteRefused, match="refused"):
            next_token(served)
    assert served.lm.profile.requests == asked and served.lm.last_error == message


def test_https_is_verified_against_the_named_authority(server, tmp_path):
    with TLSProxy(("127.0.0.1", server.port), tmp_path) as endpoint:
        trusted = engine(endpoint.url, api_key=KEY, ca_file=str(endpoint.ca_file))
        assert trusted.lm.last_error is None
        assert next_token(trusted) == next_token(engine(server.url, api_key=KEY))

        untrusted = engine(endpoint.url, api_key=KEY)  # the system's authorities alone: not the team's
        assert "does not trust" in untrusted.lm.last_error and "remoteCaFile" in untrusted.lm.last_error
        with pytest.raises(RemoteUnavailable, match="does not trust"):
            next_token(untrusted)


def test_a_line_in_one_request_goes_through_tls_with_the_key(server, tmp_path):
    """The streamed run (`cpc.runs`) on its own connection: with the key, through the TLS endpoint, the text of
    one request per token."""
    options, line = Options(mode="naive", max_tokens=12), "import os\n\nfor name in os.listdir("
    with TLSProxy(("127.0.0.1", server.port), tmp_path) as endpoint:
        streamed = generate(engine(endpoint.url, api_key=KEY, ca_file=str(endpoint.ca_file)), line, options=options)
    per_token = generate(engine(server.url, api_key=KEY, greedy_runs=False), line, options=options)
    assert streamed.run_tokens > 0 and per_token.run_tokens == 0
    assert streamed.completions[0].text == per_token.completions[0].text and streamed.lm_calls < per_token.lm_calls


def test_an_unreadable_authority_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(Exception, match="remoteCaFile .* cannot be read"):
        engine("https://127.0.0.1:1", ca_file=str(bad))
