"""A store URL's password is never shown, whatever characters it holds (a generated or base64
one holds / + = and may hold ? # @): not by ``redacted``, not in a remote level's warning, not
in a bad CUPY_RAWCODE_REMOTE's ConfigError, which names what is wrong without quoting a piece of
an entry that has a user part. And CUPY_RAWCODE_REMOTE takes a Windows absolute path as a local
directory level, while a scheme-less host:port stays an error."""

from __future__ import annotations

import warnings
from urllib.parse import urlsplit

import pytest

from cupy_rawcode.ground import config
from cupy_rawcode.ground.errors import ConfigError
from cupy_rawcode.ground.redaction import redacted
from cupy_rawcode.store.remote import RemoteLevelWarning, warn_failed

SECRETS = ["s3cr/et+Kq==", "Zm9vYmFy/YmF6+cXV4==", "x7?Qz9k", "x7#Qz9k", "p@Q7w@Z2", "k?Q9/w#Z@v"]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Every warn-once speaks again in each test."""
    from cupy_rawcode.ground import log

    monkeypatch.setattr(log, "_said", set())


def shown(secret: str, text: str) -> list[str]:
    """The pieces of ``secret`` (3 characters or more) that ``text`` shows."""
    return [secret[i : i + 3] for i in range(len(secret) - 2) if secret[i : i + 3] in text]


def urls(secret: str) -> list[str]:
    return [
        f"redis://:{secret}@cache.internal:6379/0",
        f"rediss://app:{secret}@cache.internal/0",
        f"https://app:{secret}@kernels.internal/cuda12",
        f"memcached://{secret}@[::1]:11211",  # a token alone
        f"app:{secret}@cache.internal:11211",  # no scheme
    ]


@pytest.mark.parametrize("secret", SECRETS)
def test_redacted_shows_no_piece_of_the_password(secret):
    for url in urls(secret):
        text = redacted(url)
        assert shown(secret, text) == [] and "***@" in text, text
        assert text.endswith(url.rpartition("@")[2])  # the host is still shown
        message = f"the store {url} failed (ConnectionError: {url} refused)"
        assert shown(secret, redacted(message)) == [], redacted(message)


def test_a_plain_user_is_still_shown():
    assert redacted("redis://app:s3cr/et@h:6379/0") == "redis://app:***@h:6379/0"
    assert redacted("https://user@host/c") == "https://***@host/c"  # a token alone
    assert redacted("redis://ap/p:secret@h") == "redis://***@h"  # no plain name: all masked


@pytest.mark.parametrize("secret", SECRETS)
def test_a_warning_shows_no_piece_of_the_password(secret):
    for url in urls(secret):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_failed("remote", redacted(url), ConnectionError(f"cannot reach {url}"))
        said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
        assert len(said) == 1 and shown(secret, said[0]) == [], said


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("scheme", ["http", "s3"])
def test_a_level_whose_error_quotes_a_piece_of_its_password_warns_none(secret, scheme):
    """A client library that reads a / ? # of the password as the end of the host quotes what
    it took for the port or the bucket (``'s3cr'``): the level's own URL masks those pieces."""
    from cupy_rawcode.store import Levels
    from cupy_rawcode.store.memory import MemoryStore

    class Failing(MemoryStore):
        name = scheme

        def __init__(self, url):
            super().__init__()
            self.url = url

        @property
        def location(self):
            return redacted(self.url)

        def get(self, key):
            parts = urlsplit(self.url)
            if scheme == "http":
                parts.port  # noqa: B018  # ValueError: "... as 's3cr'", what urllib says
            raise ConnectionError(f"no such bucket: {parts.netloc!r}")  # boto3's words

    url = f"{scheme}://app:{secret}@kernels.internal/cuda12"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert Levels([MemoryStore(), Failing(url)]).get("ab" * 32) is None
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 1 and shown(secret, said[0]) == [], said


@pytest.mark.parametrize("secret", SECRETS)
def test_a_redis_level_that_cannot_be_opened_warns_no_piece_of_the_password(secret):
    """redis-py reads a password's / ? # as the end of the host, and its error quotes the
    "port" it could not read: a piece of the password."""
    pytest.importorskip("redis", reason="the redis client is not installed (extra 'redis')")
    from cupy_rawcode.store.redis import RedisStore

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = RedisStore(f"redis://:{secret}@127.0.0.1:1/0", timeout=0.2)
        store.get("ab" * 32)
    said = [str(w.message) for w in caught if issubclass(w.category, RemoteLevelWarning)]
    assert len(said) == 1 and all(shown(secret, text) == [] for text in said), said


@pytest.mark.parametrize("secret", SECRETS)
def test_a_remote_entry_with_such_a_password_is_accepted(monkeypatch, secret):
    value = f"redis://:{secret}@cache.internal:6379/0 https://app:{secret}@kernels.internal/c"
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", value)
    config.validate()
    assert config.remote() == tuple(value.split())


@pytest.mark.parametrize("secret", [*SECRETS, "x7Qz 9kWv"])  # a space splits the entry
@pytest.mark.parametrize(
    "form, says",
    [
        ("memcached://app:{}@cache.internal:port", "the port is not a number"),
        ("memcached://app:{}@cache.internal:99999", "the port is not a number"),
        ("htp://app:{}@kernels.internal/x", "unknown scheme ("),
        ("app:{}@cache.internal:11211", "no scheme"),
        ("https://app:{}@kernels.internal:8o8o/x", "the port is not a number"),
    ],
)
def test_the_config_error_shows_no_piece_of_the_password(monkeypatch, secret, form, says):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", form.format(secret))
    with pytest.raises(ConfigError) as e:
        config.validate()
    message = str(e.value)
    assert message.startswith("CUPY_RAWCODE_REMOTE: ") and shown(secret, message) == [], message
    if " " not in secret:
        assert says in message, message


@pytest.mark.parametrize(
    "value",
    [
        r"C:\shared\cache",
        "C:/shared/cache",
        r"\\server\share\cache",
        r"D:\cache|read-only",
        r"z:\cache memcached://cache.internal:11211",
    ],
)
def test_a_windows_absolute_path_is_a_local_level(monkeypatch, value):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", value)
    config.validate()
    assert config.remote() == tuple(value.split())


@pytest.mark.parametrize(
    "value", ["cache.internal:11211", "c:11211", "C:11211", "localhost:6379", "C:"]
)
def test_a_host_and_port_without_a_scheme_is_still_an_error(monkeypatch, value):
    monkeypatch.setenv("CUPY_RAWCODE_REMOTE", value)
    with pytest.raises(ConfigError, match="no scheme"):
        config.validate()
