"""The rest of the sqlite3 surface that CPython's own tests use, twin
against sqlite3: serialize and deserialize, calling a connection, rows,
cursor factories, objects whose __init__ did not run, adapters and
converters, recursive use of a cursor, buffers, errors of functions."""

import array
import collections.abc
import os
import sqlite3
import warnings

import pytest

import pleroma


def _norm(m, f):
    """``f()``'s value's type, or its exception with the module's name
    taken out of the message."""
    try:
        return ("value", type(f()).__name__)
    except Exception as e:  # noqa: BLE001 (every error is an observation)
        return ("raised", type(e).__name__, str(e).replace(m.__name__ + ".", ""))


def test_serialize_and_deserialize(both):
    def script(m, con, rec):
        with con:
            con.execute("CREATE TABLE t(a, b)")
            con.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(50)])
        data = con.serialize()
        rec("bytes", lambda: (type(data).__name__, len(data) % 512))
        rec("no such schema", lambda: con.serialize(name="nosuch"))
        with m.connect(":memory:") as copy:
            rec("deserialize", lambda: copy.deserialize(data))
            rec("copied", lambda: copy.execute("SELECT COUNT(*), SUM(a) FROM t").fetchall())
            rec("again", lambda: copy.deserialize(copy.serialize()))
            rec("deserialize attached", lambda: (
                copy.execute("ATTACH ':memory:' AS aux"), copy.deserialize(data, name="aux")))
            rec("aux", lambda: copy.execute("SELECT COUNT(*) FROM aux.t").fetchall())
            rec("in transaction", lambda: (copy.execute("BEGIN"),
                                           copy.deserialize(data)))
            copy.rollback()
            for i, bad in enumerate((memoryview(b"blob")[::2], [], 1, None, "text")):
                rec(f"bad {i}", lambda bad=bad: copy.deserialize(bad))
            rec("after text", lambda: copy.execute("SELECT 1 FROM t").fetchall())
        with m.connect(":memory:") as corrupt:
            def load():
                corrupt.deserialize(b"\0\1\3")
                corrupt.execute("CREATE TABLE fail(f)")
            rec("corrupt", load)

    both(script, name=":memory:")


def test_deserialize_reopens_the_planes():
    src = pleroma.connect(":memory:")
    src.executescript("CREATE TABLE ev(country TEXT, cents INTEGER);"
                      "INSERT INTO ev VALUES ('DE', 5), ('FR', 7), ('DE', 1);"
                      "PRAGMA pleroma_attach('ev', 'country', 'cents');")
    dst = pleroma.connect(":memory:")
    dst.executescript("CREATE TABLE ev(country TEXT, cents INTEGER);"
                      "INSERT INTO ev VALUES ('XX', 100);"
                      "PRAGMA pleroma_attach('ev', 'country', 'cents');")
    sql = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    assert dst.execute(sql).fetchall() == [("XX", 100)]
    dst.deserialize(src.serialize())
    assert dst.execute(sql).fetchall() == [("DE", 6), ("FR", 7)]
    assert dst.last_route in ("plane", "memo")
    src.close()
    dst.close()


def test_deserialize_declined_on_a_file(tmp_path):
    con = pleroma.connect(str(tmp_path / "f.db"))
    con.execute("CREATE TABLE t(a)")
    data = con.serialize()
    with pytest.raises(pleroma.NotSupportedError, match="in-memory"):
        con.deserialize(data)
    assert con.execute("SELECT COUNT(*) FROM t").fetchall() == [(0,)]
    con.close()


def test_calling_a_connection(both):
    def script(m, con, rec):
        rec("call", lambda: _norm(m, lambda: con("SELECT 1")))
        rec("statement type", lambda: _norm(m, lambda: type(con("SELECT 1"))()))
        rec("two statements", lambda: _norm(m, lambda: con("SELECT 1; SELECT 2")))
        rec("bad sql", lambda: _norm(m, lambda: con("SELEC 1")))
        rec("not str", lambda: _norm(m, lambda: con(1)))
        rec("surrogate", lambda: _norm(m, lambda: con("SELECT '\ud8ff'")))
        rec("null", lambda: _norm(m, lambda: con("SELECT 1\x00")))
        con.close()
        rec("closed", lambda: _norm(m, lambda: con("SELECT 1")))

    both(script)


def test_rows_and_cursor_factories(both):
    def script(m, con, rec):
        con.row_factory = m.Row
        row = con.execute("SELECT 1 AS a, 2 AS \xff, 3 AS B").fetchone()
        rec("sequence", lambda: isinstance(row, collections.abc.Sequence))
        rec("reversed", lambda: list(reversed(row)))
        for key in ("a", "A", "\xff", "\u0178", "\xdf", "b"):
            rec(f"key {key!r}", lambda key=key: row[key])

        class FakeCursor(str):
            __class__ = m.Cursor

        rec("fake cursor factory", lambda: _norm(m, lambda: con.cursor(FakeCursor)))
        rec("fake cursor row", lambda: _norm(m, lambda: m.Row(FakeCursor(), ())))
        rec("row of a list", lambda: _norm(m, lambda: m.Row(con.cursor(), [])))
        rec("factory None", lambda: con.cursor(None))
        rec("factory of no argument", lambda: con.cursor(lambda: None))
        rec("factory returning None", lambda: con.cursor(lambda c: None))
        rec("default factory", lambda: type(con.cursor()) is m.Cursor)

    both(script)


def test_objects_whose_init_did_not_run(both):
    def script(m, con, rec):
        cx = m.Connection.__new__(m.Connection)
        for name, f in (("isolation_level", lambda: cx.isolation_level),
                        ("total_changes", lambda: cx.total_changes),
                        ("in_transaction", lambda: cx.in_transaction),
                        ("iterdump", lambda: cx.iterdump()),
                        ("cursor", lambda: cx.cursor()),
                        ("close", lambda: cx.close()),
                        ("execute", lambda: cx.execute("SELECT 1"))):
            rec(f"connection {name}", f)

        class Sub(m.Connection):
            def __init__(self, name):
                pass

        rec("subclass cursor", lambda: Sub(":memory:").cursor())

        class Cur(m.Cursor):
            def __init__(self, con):
                pass

        cur = Cur(con)
        rec("cursor execute", lambda: cur.execute("SELECT 1"))
        rec("cursor close", lambda: cur.close())
        rec("cursor fetchall", lambda: cur.fetchall())

        good = m.connect(":memory:")
        good.execute("CREATE TABLE t(x)")
        rec("reinit bad path", lambda: good.__init__(os.path.join(os.sep, "nonexistent", "x", "y.db")))
        rec("after a failed reinit", lambda: good.execute("SELECT 1"))
        rec("closed isolation_level", lambda: (con.close(), con.isolation_level))

    both(script)


def test_adapters_and_converters(both):
    def script(m, con, rec):
        class Proto:
            def __adapt__(self):
                return "adapted"

        class BadConform:
            def __init__(self, exc):
                self.exc = exc

            def __conform__(self, protocol):
                raise self.exc

        rec("proto __adapt__", lambda: m.adapt(1.0, Proto))
        rec("alt None", lambda: m.adapt(1.0, None, None))
        rec("no alt", lambda: m.adapt(1.0, None))
        rec("conform TypeError", lambda: con.execute("SELECT ?", (BadConform(TypeError),)))
        rec("conform TypeError named", lambda: con.execute("SELECT :v", {"v": BadConform(TypeError)}))
        rec("conform KeyError", lambda: con.execute("SELECT ?", (BadConform(KeyError),)))
        rec("array binds", lambda: con.execute("SELECT ?", (array.array("b", [1, 2]),)).fetchall())
        rec("strided binds", lambda: con.execute("SELECT ?", (memoryview(b"abcd")[::2],)))
        con.create_function("strided", 0, lambda: memoryview(b"abcd")[::2])
        rec("strided result", lambda: con.execute("SELECT strided()").fetchall())

        class X:
            def __conform__(self, protocol):
                parameters.clear()
                return "..."

        parameters = [X(), 0]
        rec("mutated list", lambda: con.execute("SELECT ?, ?", parameters))

        con.execute("CREATE TABLE t(cbin BLOB, ctext TEXT)")
        con.execute("INSERT INTO t VALUES (?, ?)", (b"", ""))
        con.execute("INSERT INTO t VALUES (?, ?)", (b"x", "y"))
        con.commit()
        path = con.execute("PRAGMA database_list").fetchone()[2]
        old = dict(m.converters)
        m.register_converter("BLOB", lambda b: ("blob", b))
        m.register_converter("TEXT", lambda b: ("text", b))
        try:
            with m.connect(path, detect_types=m.PARSE_DECLTYPES) as typed:
                rec("zero-size converted", lambda: typed.execute("SELECT cbin, ctext FROM t").fetchall())
        finally:
            m.converters.clear()
            m.converters.update(old)

        m.register_adapter(int, float)
        try:
            rec("int adapted", lambda: con.execute("SELECT ?, typeof(?)", (4, 5)).fetchall())
            rec("named adapted", lambda: con.execute("SELECT :a", {"a": 4}).fetchall())
            rec("many adapted", lambda: con.executemany("INSERT INTO t(cbin) VALUES (?)", [(7,)]).rowcount)
            rec("stored", lambda: con.execute("SELECT cbin, typeof(cbin) FROM t WHERE rowid = 3").fetchall())
        finally:
            del m.adapters[(int, m.PrepareProtocol)]

    both(script)


def test_recursive_use_of_cursors(both):
    def script(m, con, rec):
        con.close()
        con = m.connect(":memory:", detect_types=m.PARSE_COLNAMES)
        cur = con.cursor()
        cur.execute("CREATE TABLE test(x)")
        cur.executemany("INSERT INTO test(x) VALUES (?)", [("foo",), ("bar",)])
        old = dict(m.converters)
        try:
            m.converters["INIT"] = lambda x: cur.__init__(con)
            m.converters["CLOSE"] = lambda x: cur.close()
            m.converters["ITER"] = lambda x, seen=[]: cur.fetchone() if seen else seen.append(1)
            for name in ("INIT", "CLOSE", "ITER"):
                cur.execute(f'SELECT x AS "x [{name}]", x FROM test')
                rec(name, cur.fetchall)
        finally:
            m.converters.clear()
            m.converters.update(old)

        class Unhashable(m.Cursor):
            def __eq__(self, other):
                return False

        u = con.cursor(Unhashable)
        rec("unhashable many", lambda: u.executemany("INSERT INTO test(x) VALUES (?)", [(2,)]).rowcount)
        u.row_factory = lambda c, r: r[0]
        rec("unhashable rows", lambda: u.execute("SELECT x FROM test ORDER BY rowid").fetchall())

        def rows():
            cur.execute("INSERT INTO test(x) VALUES (?)", (1,))
            yield (1,)

        rec("from the parameters", lambda: cur.executemany("INSERT INTO test(x) VALUES (?)", rows()))
        rec("after", lambda: cur.execute("SELECT COUNT(*) FROM test").fetchall())

    both(script)


def test_errors_of_functions_and_text(both):
    def script(m, con, rec):
        def oom():
            raise MemoryError

        def overflow():
            raise OverflowError

        con.create_function("oom", 0, oom)
        con.create_function("overflow", 0, overflow)
        con.create_function("surrogate", 0, lambda: "\ud800")
        rec("memory", lambda: con.execute("SELECT oom()").fetchall())
        rec("overflow", lambda: con.execute("SELECT overflow()").fetchall())
        rec("surrogate", lambda: con.execute("SELECT surrogate()").fetchall())
        rec("bad utf-8 class", lambda: _norm(m, lambda: con.execute(
            "SELECT 'xxx' || ? || 'yyy' AS colname", (bytes([250]),)).fetchall())[:2])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            rec("OptimizedUnicode", lambda: m.OptimizedUnicode)
            rec("warned", lambda: [x.category.__name__ for x in w])

    both(script)


def test_undecodable_path(tmp_path):
    name = os.fsdecode(b"\xe7db.db")
    for m in (sqlite3, pleroma):
        path = tmp_path / m.__name__
        path.mkdir()
        con = m.connect(str(path / name))
        con.execute("CREATE TABLE t(a)")
        con.close()
        assert os.listdir(os.fsencode(str(path))) == [b"\xe7db.db"]
