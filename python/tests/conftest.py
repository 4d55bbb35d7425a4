"""Twin runs: the same script against the sqlite3 module and against
pleroma, on twin files; what each observes must be identical, types
included."""

import sqlite3

import pytest

import pleroma


def typed(v):
    """A value with its type spelled out, so that 1, 1.0 and True differ."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [typed(x) for x in v])
    if isinstance(v, (sqlite3.Row, pleroma.Row)):
        return ("Row", list(v.keys()), [typed(x) for x in v])
    if isinstance(v, (sqlite3.Cursor, pleroma.Cursor)):
        return "Cursor"
    return (type(v).__name__, v)


class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, label, f):
        """Run ``f``; record its value or its exception's class and message."""
        try:
            v = f()
        except Exception as e:  # noqa: BLE001 (every error is an observation)
            self.seen.append((label, "raised", type(e).__name__, str(e)))
            return None
        self.seen.append((label, typed(v)))
        return v


def twin(tmp_path, script, name="t.db", **connect):
    """Run ``script(module, con, rec)`` against each module on its own
    file; assert both saw the same, and return what pleroma saw."""
    seen = {}
    for m in (sqlite3, pleroma):
        d = tmp_path / m.__name__
        d.mkdir(exist_ok=True)
        path = ":memory:" if name == ":memory:" else str(d / name)
        con = m.connect(path, **connect)
        rec = Recorder()
        try:
            script(m, con, rec)
        finally:
            con.close()
        seen[m.__name__] = rec.seen
    a, b = seen["sqlite3"], seen["pleroma"]
    for x, y in zip(a, b):
        assert x == y, f"sqlite3 saw {x!r}, pleroma saw {y!r}"
    assert len(a) == len(b)
    assert a, "the script observed nothing"
    return b


@pytest.fixture
def both(tmp_path):
    return lambda script, **kw: twin(tmp_path, script, **kw)
