"""The DB-API surface, run twin against the sqlite3 module."""

import datetime
import sqlite3

import pytest

import pleroma


def test_module_attributes():
    assert pleroma.apilevel == "2.0"
    assert pleroma.paramstyle == "qmark"
    assert pleroma.threadsafety in (1, 2, 3)
    assert pleroma.sqlite_version_info >= (3, 40, 0)
    for name in ("Error", "DatabaseError", "IntegrityError", "OperationalError",
                 "ProgrammingError", "InterfaceError", "DataError",
                 "NotSupportedError", "InternalError", "Warning"):
        ours, theirs = getattr(pleroma, name), getattr(sqlite3, name)
        assert [c.__name__ for c in ours.__mro__[:-2]] == \
            [c.__name__ for c in theirs.__mro__[:-2]], name


def test_execute_fetch_and_describe(both):
    def script(m, con, rec):
        rec("create", lambda: con.execute("CREATE TABLE t(a INTEGER, b TEXT, c REAL, d BLOB)").rowcount)
        cur = con.cursor()
        rec("insert", lambda: cur.execute("INSERT INTO t VALUES (?, ?, ?, ?)", (1, "x", 1.5, b"\x00\x01")).rowcount)
        rec("lastrowid", lambda: cur.lastrowid)
        rec("many", lambda: cur.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                                            [(i, str(i), i / 2, None) for i in range(2, 9)]).rowcount)
        rec("desc none", lambda: cur.description)
        cur.execute("SELECT a, b AS bee, c, d, a + c FROM t ORDER BY a")
        rec("desc", lambda: cur.description)
        rec("rowcount select", lambda: cur.rowcount)
        rec("one", cur.fetchone)
        rec("many default", cur.fetchmany)
        cur.arraysize = 3
        rec("many size", cur.fetchmany)
        rec("many 2", lambda: cur.fetchmany(2))
        rec("rest", cur.fetchall)
        rec("after", cur.fetchone)
        rec("iter", lambda: [r for r in con.execute("SELECT a FROM t WHERE a > ?", (5,))])
        rec("empty", lambda: con.execute("SELECT * FROM t WHERE 0").fetchall())
        rec("empty desc", lambda: con.execute("SELECT a AS z FROM t WHERE 0").description)
        rec("update", lambda: con.execute("UPDATE t SET b = b || '!' WHERE a < 4").rowcount)
        rec("delete", lambda: con.execute("DELETE FROM t WHERE a = 8").rowcount)
        rec("ddl", lambda: con.execute("CREATE INDEX i ON t(a)").rowcount)
        rec("blank", lambda: con.execute("").fetchall())
        rec("comment", lambda: con.execute("  -- nothing").description)
        rec("tail", lambda: con.execute("SELECT 1; ").fetchall())
        rec("total", lambda: con.total_changes)
        rec("returning", lambda: con.execute("INSERT INTO t(a) VALUES (99) RETURNING a, b").fetchall())
    both(script)


def test_types_both_ways(both):
    def script(m, con, rec):
        con.execute("CREATE TABLE v(x)")
        values = [0, -1, 2**63 - 1, -2**63, 1.25, -0.0, float("inf"), "", "héllo ✓",
                  b"", b"\xff\x00", None, True, False, bytearray(b"ab"),
                  memoryview(b"cd")]
        for v in values:
            rec(f"bind {v!r}", lambda v=v: con.execute("SELECT ?, typeof(?)", (v, v)).fetchone())
            con.execute("INSERT INTO v VALUES (?)", (v,))
        rec("stored", lambda: con.execute("SELECT x, typeof(x) FROM v").fetchall())
        rec("too big", lambda: con.execute("SELECT ?", (2**63,)))
        rec("too small", lambda: con.execute("SELECT ?", (-2**63 - 1,)))
        rec("list", lambda: con.execute("SELECT ?", ([1],)))
        rec("object", lambda: con.execute("SELECT ?", (object(),)))
        rec("int params", lambda: con.execute("SELECT ?", 5))
        rec("str params", lambda: con.execute("SELECT ?", "a").fetchall())
        rec("date", lambda: con.execute("SELECT ?", (datetime.date(2026, 12, 4),)).fetchall())
        rec("datetime", lambda: con.execute(
            "SELECT ?", (datetime.datetime(2026, 12, 4, 10, 30, 1),)).fetchall())
    both(script)


def test_parameters(both):
    def script(m, con, rec):
        rec("named", lambda: con.execute("SELECT :a, :b, :a", {"a": 1, "b": "x"}).fetchall())
        rec("at and dollar", lambda: con.execute("SELECT @a, $b", {"a": 1, "b": 2}).fetchall())
        rec("numbered", lambda: con.execute("SELECT ?2, ?1, ?2", (1, 2)).fetchall())
        rec("named by position", lambda: con.execute("SELECT :a", (7,)).fetchall())
        rec("missing name", lambda: con.execute("SELECT :a", {"b": 1}))
        rec("dict for qmark", lambda: con.execute("SELECT ?", {"a": 1}))
        rec("too many", lambda: con.execute("SELECT ?", (1, 2)))
        rec("too few", lambda: con.execute("SELECT ?, ?", (1,)))
        rec("none given", lambda: con.execute("SELECT ?"))
        rec("two statements", lambda: con.execute("SELECT 1; SELECT 2"))
        rec("bad first of two", lambda: con.execute("SELEC 1; SELECT 2"))
        rec("many not dml", lambda: con.executemany("SELECT ?", [(1,), (2,)]))
        con.execute("CREATE TABLE t(a)")
        rec("many generator", lambda: con.executemany(
            "INSERT INTO t VALUES (?)", ((i,) for i in range(5))).rowcount)
        rec("many dicts", lambda: con.executemany(
            "INSERT INTO t VALUES (:x)", [{"x": 10}, {"x": 11}]).rowcount)
        rec("rows", lambda: con.execute("SELECT a FROM t ORDER BY a").fetchall())
    both(script)


def test_errors(both):
    def script(m, con, rec):
        con.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b UNIQUE, c NOT NULL, d CHECK (d > 0))")
        con.execute("INSERT INTO t VALUES (1, 1, 1, 1)")
        for label, sql in [
            ("syntax", "SELEC 1"),
            ("no table", "SELECT * FROM nosuch"),
            ("no column", "SELECT nosuch FROM t"),
            ("unique", "INSERT INTO t VALUES (2, 1, 1, 1)"),
            ("primary key", "INSERT INTO t VALUES (1, 2, 1, 1)"),
            ("not null", "INSERT INTO t VALUES (3, 3, NULL, 1)"),
            ("check", "INSERT INTO t VALUES (4, 4, 4, -1)"),
            ("mismatch", "INSERT INTO t(a, c) VALUES ('x', 1)"),
            ("overflow", "SELECT abs(-9223372036854775808)"),
            ("values", "INSERT INTO t VALUES (1)"),
        ]:
            rec(label, lambda sql=sql: con.execute(sql))
            rec(label + " code", lambda sql=sql: _code(con, sql))
        rec("rows kept", lambda: con.execute("SELECT * FROM t").fetchall())
        rec("unique in many", lambda: con.executemany(
            "INSERT INTO t VALUES (?, ?, 1, 1)", [(10, 10), (11, 1)]))
        con.rollback()
        rec("after many", lambda: con.execute("SELECT count(*) FROM t").fetchall())
        rec("no script", lambda: con.executescript(5))
        rec("script error", lambda: con.executescript(
            "INSERT INTO t VALUES (20, 20, 20, 20); SELEC; INSERT INTO t VALUES (21, 21, 21, 21);"))
        rec("after script", lambda: con.execute("SELECT a FROM t ORDER BY a").fetchall())
    both(script)


def _code(con, sql):
    try:
        con.execute(sql)
    except Exception as e:  # noqa: BLE001
        return getattr(e, "sqlite_errorcode", None), getattr(e, "sqlite_errorname", None)
    return None


def test_closed_objects(both):
    def script(m, con, rec):
        cur = con.execute("SELECT 1")
        cur.close()
        rec("closed cursor", cur.fetchall)
        rec("closed cursor execute", lambda: cur.execute("SELECT 1"))
        con.close()
        rec("closed execute", lambda: con.execute("SELECT 1"))
        rec("closed cursor()", con.cursor)
        rec("closed commit", con.commit)
        rec("closed in_transaction", lambda: con.in_transaction)
        rec("close twice", con.close)
    both(script)


def test_row_factories(both):
    def script(m, con, rec):
        con.execute("CREATE TABLE t(a, B)")
        con.execute("INSERT INTO t VALUES (1, 'x')")
        con.row_factory = m.Row
        row = rec("row", lambda: con.execute("SELECT a, B AS bee FROM t").fetchone())
        rec("by name", lambda: (row["a"], row["BEE"], row[0], row[-1], len(row), row.keys()))
        rec("missing", lambda: row["nope"])
        rec("slice", lambda: row[0:2])
        rec("eq", lambda: row == con.execute("SELECT a, B AS bee FROM t").fetchone())
        rec("tuple", lambda: tuple(row))
        con.row_factory = lambda cur, t: {d[0]: v for d, v in zip(cur.description, t)}
        rec("dict", lambda: con.execute("SELECT a, B FROM t").fetchall())
        cur = con.cursor()
        cur.row_factory = None
        rec("cursor's own", lambda: cur.execute("SELECT a FROM t").fetchall())
        con.row_factory = None
        con.text_factory = bytes
        rec("bytes", lambda: con.execute("SELECT B, a FROM t").fetchall())
        con.text_factory = lambda b: b.decode().upper()
        rec("callable", lambda: con.execute("SELECT B, a FROM t").fetchall())
    both(script)


def test_converters(both):
    def script(m, con, rec):
        m.register_converter("POINT", lambda b: tuple(int(x) for x in b.split(b";")))
        con.execute("CREATE TABLE p(pt POINT, n INTEGER)")
        con.execute("INSERT INTO p VALUES ('1;2', 3)")
        rec("plain", lambda: con.execute("SELECT pt FROM p").fetchall())
    both(script)
    both(lambda m, con, rec: (
        m.register_converter("POINT", lambda b: tuple(int(x) for x in b.split(b";"))),
        con.execute("CREATE TABLE p(pt POINT, n INTEGER)"),
        con.execute("INSERT INTO p VALUES ('1;2', 3)"),
        rec("decltypes", lambda: con.execute("SELECT pt, n FROM p").fetchall()),
        rec("colnames", lambda: con.execute('SELECT n AS "n [POINT]" FROM p').fetchall()),
        rec("colnames desc", lambda: con.execute('SELECT n AS "n [POINT]" FROM p').description),
    ), name="t2.db", detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES)


def test_functions(both):
    def script(m, con, rec):
        con.create_function("twice", 1, lambda x: None if x is None else x * 2)
        con.create_function("boom", 0, lambda: 1 / 0)
        rec("twice", lambda: con.execute("SELECT twice(2), twice('ab'), twice(NULL), twice(1.5)").fetchall())
        rec("boom", lambda: con.execute("SELECT boom()"))
        rec("complete", lambda: (m.complete_statement("SELECT 1;"), m.complete_statement("SELECT 1")))
    both(script)


def test_connect_forms(tmp_path):
    p = tmp_path / "a.db"
    con = pleroma.connect(p)  # a path-like object
    con.execute("CREATE TABLE t(a)")
    con.commit()
    con.close()
    con = pleroma.connect(f"file:{p}?mode=ro", uri=True)
    assert con.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    with pytest.raises(pleroma.OperationalError, match="readonly"):
        con.execute("INSERT INTO t VALUES (1)")
    con.close()
    with pytest.raises(pleroma.OperationalError, match="unable to open database file"):
        pleroma.connect(str(tmp_path / "no" / "such" / "dir.db"))
    with pytest.raises(ValueError):
        pleroma.connect(":memory:", isolation_level="SOMETIMES")


def test_interrupt_and_unsupported():
    import threading

    con = pleroma.connect(":memory:", check_same_thread=False)
    seen = []

    def endless():
        try:
            con.execute("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                        "SELECT count(*) FROM r")
        except pleroma.OperationalError as e:
            seen.append(str(e))

    t = threading.Thread(target=endless)
    t.start()
    while t.is_alive():  # until the statement runs and is ended
        con.interrupt()
        t.join(0.01)
    assert seen == ["interrupted"]
    assert con.execute("SELECT 1").fetchall() == [(1,)]
    with pytest.raises(pleroma.NotSupportedError, match="load_extension"):
        con.load_extension("x")
    with pytest.raises(AttributeError):
        con.no_such_method
    con.close()


def test_found_from_outside(both):
    """What the first outside attack on the package found, each a twin."""
    import collections
    import decimal

    def script(m, con, rec):
        con.execute("CREATE TABLE t(a)")
        con.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
        cur = con.execute("SELECT a FROM t ORDER BY a")
        rec("fetchmany -1", lambda: cur.fetchmany(-1))
        cur = con.execute("SELECT a FROM t ORDER BY a")
        cur.arraysize = 0
        rec("arraysize 0", cur.fetchmany)
        rec("arraysize type", lambda: setattr(cur, "arraysize", "x"))
        con.commit()
        rec("many empty", lambda: (con.executemany("INSERT INTO t VALUES (?)", []).rowcount,
                                   con.in_transaction))
        con.rollback()
        rec("many ddl", lambda: con.executemany("CREATE TABLE IF NOT EXISTS z(a)", [()]).rowcount)
        rec("many select", lambda: con.executemany("SELECT ?", [(1,)]))
        con.text_factory = lambda b: b.decode().upper()
        rec("text factory spares blobs", lambda: con.execute("SELECT 'abc', x'6869'").fetchall())
        con.text_factory = bytes
        rec("bytes factory", lambda: con.execute("SELECT 'abc', x'6869'").fetchall())
        con.text_factory = str
        rec("decimal", lambda: con.execute("SELECT ?", (decimal.Decimal(1),)))
        rec("userdict", lambda: con.execute("SELECT :a", collections.UserDict(a=1)))
        con.row_factory = m.Row
        row = con.execute("SELECT 1 AS a").fetchone()
        rec("row float index", lambda: row[1.0])
        con.row_factory = None
        rec("narg 200", lambda: con.create_function("k", 200, lambda *a: 1))
        rec("module names", lambda: (m.Binary(b"x").tobytes(), m.Date(2020, 1, 2),
                                     m.Time(1, 2, 3), m.Timestamp(2020, 1, 2, 3, 4, 5)))
        rec("adapt", lambda: m.adapt(5, m.PrepareProtocol, "alt"))
        rec("level case", lambda: m.connect(":memory:", isolation_level="deferred").isolation_level)
        rec("detect type", lambda: m.connect(":memory:", detect_types="x"))
        rec("timeout type", lambda: m.connect(":memory:", timeout="x"))
    both(script)


def test_bool_adapter_and_default_converters(both):
    import datetime

    def script(m, con, rec):
        con.execute("CREATE TABLE d(day date, at timestamp)")
        con.execute("INSERT INTO d VALUES (?, ?)",
                    (datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5, 600)))
        rec("converted", lambda: con.execute("SELECT day, at FROM d").fetchall())
        m.register_adapter(bool, lambda b: "B" if b else "b")
        try:
            rec("bool adapted", lambda: con.execute("SELECT ?, ?", (True, 1)).fetchall())
        finally:
            del m.adapters[(bool, m.PrepareProtocol)]
    both(script, name="d.db", detect_types=sqlite3.PARSE_DECLTYPES)


def test_comments_and_reentrant_functions(both):
    def script(m, con, rec):
        con.execute("CREATE TABLE t(a)")
        rec("prefixed", lambda: con.execute("-- foo\n/* bar */ INSERT INTO t VALUES (1), (2)").rowcount)
        rec("in txn", lambda: con.in_transaction)
        rec("appended", lambda: con.execute("SELECT a FROM t ORDER BY a; /*").fetchall())
        rec("appended line", lambda: con.execute("SELECT 1; -- x").fetchall())
    both(script)


def test_a_function_using_its_own_connection_is_refused_not_hung():
    # sqlite3 lets the function run a statement on the connection that is
    # running the one calling it; pleroma refuses (docs/python.md), and
    # never waits for itself.
    con = pleroma.connect(":memory:")
    con.execute("CREATE TABLE t(a)")
    con.execute("INSERT INTO t VALUES (1)")
    con.create_function("dup", 1, lambda v: con.execute("SELECT ?", (v,)).fetchone()[0])
    with pytest.raises(pleroma.OperationalError, match="user-defined function raised exception"):
        con.execute("SELECT dup(a) FROM t")
    assert con.execute("SELECT a FROM t").fetchall() == [(1,)]
    con.close()


def test_aggregates_and_collations(both):
    class Total:
        def __init__(self):
            self.n = 0

        def step(self, v):
            self.n += v or 0

        def finalize(self):
            return self.n

    class Broken:
        def step(self, v):
            raise ValueError(v)

        def finalize(self):
            return 0

    def script(m, con, rec):
        con.create_aggregate("total_of", 1, Total)
        con.create_aggregate("broken", 1, Broken)
        con.execute("CREATE TABLE t(g, v)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [("a", 1), ("b", 2), ("a", 3), ("b", None)])
        rec("grouped", lambda: con.execute(
            "SELECT g, total_of(v) FROM t GROUP BY g ORDER BY g").fetchall())
        rec("no rows", lambda: con.execute("SELECT total_of(v) FROM t WHERE 0").fetchall())
        rec("broken", lambda: con.execute("SELECT broken(v) FROM t"))
        con.create_collation("rev", lambda a, b: (a < b) - (a > b))
        rec("collated", lambda: con.execute(
            "SELECT g FROM t ORDER BY g COLLATE rev, v").fetchall())
        con.create_collation("rev", None)
        rec("removed", lambda: con.execute("SELECT g FROM t ORDER BY g COLLATE rev"))
        rec("not callable", lambda: con.create_collation("x", 5))
    both(script)


def test_iterdump(both, tmp_path):
    def script(m, con, rec):
        con.executescript(
            "CREATE TABLE t(id INTEGER PRIMARY KEY AUTOINCREMENT, s TEXT, b BLOB, r REAL);"
            "INSERT INTO t(s, b, r) VALUES ('it''s', x'00ff', 1.5), (NULL, NULL, -2.0);"
            'CREATE TABLE "odd ""name"""(x);'
            "CREATE INDEX ts ON t(s);"
            "CREATE VIEW v AS SELECT s FROM t;"
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;")
        con.row_factory = lambda cur, row: list(row)
        rec("dump", lambda: list(con.iterdump()))
    both(script)

    # A file with a persisted plane: the copy replays in plain sqlite3, and
    # a Pleroma connection on the copy has the plane back.
    src = pleroma.connect(str(tmp_path / "planed.db"))
    src.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
    src.executemany("INSERT INTO ev VALUES (?, ?)", [("DE", 5), ("FR", 7), ("DE", 1)])
    src.commit()
    src.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    script_text = "\n".join(src.iterdump())
    assert "pleroma_state" not in script_text and "pleroma_guard(" not in script_text
    plain = sqlite3.connect(str(tmp_path / "plain-copy.db"))
    plain.executescript(script_text)
    plain.close()
    copy = pleroma.connect(str(tmp_path / "plain-copy.db"))
    q = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    assert copy.execute(q).fetchall() == src.execute(q).fetchall() == [("DE", 6), ("FR", 7)]
    assert copy.last_route == "plane"
    copy.close()
    src.close()


def test_window_functions(both):
    class SumInt:
        def __init__(self):
            self.count = 0

        def step(self, value):
            self.count += value

        def value(self):
            return self.count

        def inverse(self, value):
            self.count -= value

        def finalize(self):
            return self.count

    def script(m, con, rec):
        con.execute("CREATE TABLE t(x, y)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [("a", 4), ("b", 5), ("c", 3), ("d", 8)])
        con.create_window_function("sumint", 1, SumInt)
        q = ("SELECT x, sumint(y) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) "
             "FROM t ORDER BY x")
        rec("window", lambda: con.execute(q).fetchall())
        rec("as aggregate", lambda: con.execute("SELECT sumint(y) FROM t").fetchall())
        rec("bad count", lambda: con.create_window_function("w", -100, SumInt))
        con.create_window_function("sumint", 1, None)
        rec("removed", lambda: con.execute(q))
    both(script)
