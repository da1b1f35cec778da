"""heapmem.hrana without a server: URLs, values, statements."""
import math

import pytest

from heapmem import hrana


def test_urls():
    assert hrana.split_url("http://127.0.0.1:8080") == ("http", "127.0.0.1", 8080, "")
    assert hrana.split_url("libsql://db.example.com") == ("https", "db.example.com", 443, "")
    assert hrana.split_url("libsql://127.0.0.1:8080?tls=0") == ("http", "127.0.0.1", 8080, "")
    assert hrana.split_url("https://h/base/") == ("https", "h", 443, "/base")
    assert hrana.is_url("http://x") and hrana.is_url("LIBSQL://x") and not hrana.is_url("x.db")
    assert not hrana.is_url("file:x.db")
    assert hrana.url_timeout("http://h?timeout=2.5") == 2.5
    assert hrana.url_timeout("http://h") == 10.0
    for bad in ("http://h?timeout=0", "http://h?timeout=nan", "http://h?timeout=x"):
        with pytest.raises(ValueError, match="timeout must be"):
            hrana.url_timeout(bad)


def test_values_round_trip():
    for v in (None, 0, -1, (1 << 63) - 1, -(1 << 63), 0.1, 1e300, -0.0, "", "héllo\x00",
              b"", b"\x00\xffblob"):
        assert hrana.decode(hrana.encode(v)) == v
    assert hrana.decode(hrana.encode(True)) == 1
    assert math.copysign(1, hrana.decode(hrana.encode(-0.0))) == -1
    with pytest.raises(OverflowError):
        hrana.encode(1 << 63)
    with pytest.raises(ValueError):
        hrana.encode(math.nan)
    with pytest.raises(TypeError):
        hrana.encode(object())


def test_named_parameters_only_those_the_sql_uses():
    s = hrana.stmt("SELECT :id, :ids", {"id": 1, "ids": "[]", "extra": 2})
    assert [a["name"] for a in s["named_args"]] == [":id", ":ids"]
    s = hrana.stmt("SELECT :ids", {"id": 1, "ids": "[]"})
    assert [a["name"] for a in s["named_args"]] == [":ids"]
    assert hrana.stmt("SELECT ?", (5,))["args"] == [{"type": "integer", "value": "5"}]


def test_bad_tokens():
    with pytest.raises(ValueError, match="auth_token must be a non-empty string"):
        hrana.Client("http://h", auth_token="")
    with pytest.raises(ValueError, match="auth_token"):
        hrana.Client("http://h", auth_token="a\r\nX-Evil: 1")
