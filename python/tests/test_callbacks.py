"""The program's authorizer, progress handler, limits and callback
tracebacks, twin against sqlite3; and that none of them reaches Pleroma's
own statements or lets a plane answer where SQLite would not."""

import sqlite3
import sys

import pytest

import pleroma

PLANE = "PRAGMA pleroma_attach('ev', 'country', 'cents')"


def _ev(m, con):
    con.execute("CREATE TABLE ev(country TEXT, cents INTEGER, secret TEXT)")
    con.executemany("INSERT INTO ev VALUES (?, ?, ?)",
                    [("DE", 5, "a"), ("FR", 7, "b"), ("DE", 1, "c")])
    con.commit()
    if m is pleroma:
        con.execute(PLANE)


def test_authorizer(both):
    def script(m, con, rec):
        _ev(m, con)
        calls = []

        def deny(action, arg1, arg2, dbname, source):
            calls.append((action, arg1, arg2, dbname, source))
            if action == m.SQLITE_READ and arg2 == "secret":
                return m.SQLITE_DENY
            if action == m.SQLITE_DELETE:
                return m.SQLITE_DENY
            if action == m.SQLITE_READ and arg1 == "hidden":
                raise ValueError("no")
            if action == m.SQLITE_UPDATE:
                return 1.0
            if action == m.SQLITE_INSERT and arg1 == "odd":
                return 7
            return m.SQLITE_OK

        con.execute("CREATE TABLE hidden(x)")
        con.execute("CREATE TABLE odd(x)")
        con.set_authorizer(deny)
        rec("served", lambda: con.execute(
            "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country").fetchall())
        rec("calls of a served query", lambda: calls)
        rec("column denied", lambda: con.execute("SELECT secret FROM ev").fetchall())
        rec("star denied", lambda: con.execute("SELECT * FROM ev").fetchall())
        rec("aggregate over a denied column", lambda: con.execute(
            "SELECT country, COUNT(secret) FROM ev GROUP BY country").fetchall())
        rec("raised", lambda: con.execute("SELECT x FROM hidden").fetchall())
        rec("not an int", lambda: con.execute("UPDATE ev SET cents = 0"))
        rec("bad code", lambda: con.execute("INSERT INTO odd VALUES (1)"))
        rec("delete denied", lambda: con.execute("DELETE FROM ev"))
        rec("insert allowed", lambda: con.execute("INSERT INTO ev VALUES ('IT', 3, 'd')").rowcount)
        rec("in transaction", lambda: con.in_transaction)
        del calls[:]
        rec("commit", con.commit)
        rec("calls of commit", lambda: calls)
        rec("script", lambda: con.executescript("SELECT 1; SELECT secret FROM ev;"))
        rec("many", lambda: con.executemany("DELETE FROM ev WHERE cents = ?", [(1,)]))
        rec("rows", lambda: con.execute(
            "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country").fetchall())
        # A query a plane could answer, over a column the authorizer denies:
        # SQLite's refusal, not the plane's answer.
        con.set_authorizer(lambda action, arg1, arg2, *_:
                           m.SQLITE_DENY if arg2 == "cents" else m.SQLITE_OK)
        rec("plane query denied", lambda: con.execute(
            "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country").fetchall())
        rec("call denied", lambda: con("SELECT cents FROM ev"))
        con.set_authorizer(None)
        rec("cleared", lambda: con.execute("SELECT secret FROM ev ORDER BY 1").fetchall())
        rec("cleared delete", lambda: con.execute("DELETE FROM ev WHERE cents = 7").rowcount)
        con.commit()
        rec("after", lambda: con.execute(
            "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country").fetchall())

    both(script)


def test_authorizer_is_not_asked_about_pleromas_statements(tmp_path):
    """An authorizer that denies everything but SELECT (CPython's own
    test's) still lets a persisted plane's writes and follows through;
    SQLITE_IGNORE is declined."""
    con = pleroma.connect(str(tmp_path / "p.db"))
    _ev(pleroma, con)
    con.set_authorizer(lambda action, *_: pleroma.SQLITE_OK
                       if action in (pleroma.SQLITE_SELECT, pleroma.SQLITE_READ,
                                     pleroma.SQLITE_INSERT, pleroma.SQLITE_TRANSACTION,
                                     pleroma.SQLITE_FUNCTION)
                       else pleroma.SQLITE_DENY)
    con.execute("INSERT INTO ev VALUES ('IT', 3, 'd')")
    con.commit()
    other = pleroma.connect(str(tmp_path / "p.db"))
    assert other.execute("SELECT SUM(cents) FROM ev").fetchall() == [(16,)]
    other.execute("INSERT INTO ev VALUES ('IT', 4, 'e')")
    other.commit()
    assert con.execute("SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY 1").fetchall() \
        == [("DE", 6), ("FR", 7), ("IT", 7)]
    assert con.last_route in ("plane", "memo")
    with pytest.raises(pleroma.DatabaseError, match="not authorized"):
        con.execute("UPDATE ev SET cents = 1")
    con.set_authorizer(lambda action, arg1, arg2, *_: pleroma.SQLITE_IGNORE
                       if arg2 == "secret" else pleroma.SQLITE_OK)
    with pytest.raises(pleroma.NotSupportedError, match="SQLITE_IGNORE"):
        con.execute("SELECT secret FROM ev")
    assert con.execute("SELECT cents FROM ev ORDER BY rowid LIMIT 1").fetchall() == [(5,)]
    other.close()
    con.close()


def test_progress_handler(both):
    def script(m, con, rec):
        _ev(m, con)
        sql = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
        calls = []

        def count():
            calls.append(1)
            return 0

        con.set_progress_handler(count, 1)
        rec("with a counting handler", lambda: con.execute(sql).fetchall())
        rec("called", lambda: len(calls) > 0)
        con.set_progress_handler(lambda: 1, 1)
        rec("cancelled", lambda: con.execute(sql).fetchall())
        rec("cancelled write", lambda: con.execute("INSERT INTO ev VALUES ('IT', 1, 'x')"))
        con.set_progress_handler(lambda: 1 / 0, 1)
        rec("raising", lambda: con.execute(sql).fetchall())

        class BadBool:
            def __bool__(self):
                raise ZeroDivisionError

        con.set_progress_handler(lambda: BadBool(), 1)
        rec("bad bool", lambda: con.execute(sql).fetchall())
        con.set_progress_handler(lambda: 1, 0)
        rec("n of 0 clears", lambda: con.execute(sql).fetchall())
        con.set_progress_handler(lambda: 1, 1)
        con.set_progress_handler(None, 1)
        del calls[:]
        rec("cleared", lambda: con.execute(sql).fetchall())
        rec("rows", lambda: con.execute("SELECT COUNT(*) FROM ev").fetchall())

    both(script)


def test_progress_handler_keeps_the_engine(tmp_path):
    """While a handler is set the plane does not answer (SQLite runs every
    statement, so that the handler is called); once cleared it does."""
    con = pleroma.connect(str(tmp_path / "p.db"))
    _ev(pleroma, con)
    sql = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    con.execute(sql).fetchall()
    assert con.last_route in ("plane", "memo")
    con.set_progress_handler(lambda: 0, 100)
    assert con.execute(sql).fetchall() == [("DE", 6), ("FR", 7)]
    assert con.last_route == "engine"
    con.execute("INSERT INTO ev VALUES ('IT', 2, 'x')")
    con.commit()
    con.set_progress_handler(None, 0)
    assert con.execute(sql).fetchall() == [("DE", 6), ("FR", 7), ("IT", 2)]
    assert con.last_route in ("plane", "memo")
    con.close()


def test_limits(both):
    def script(m, con, rec):
        _ev(m, con)
        rec("out of bounds get", lambda: con.getlimit(-1))
        rec("out of bounds set", lambda: con.setlimit(12, 0))
        own = [con.getlimit(c) for c in range(12)]
        rec("negative leaves", lambda: [con.setlimit(c, -1) == own[c] for c in range(12)])
        rec("unchanged", lambda: [con.getlimit(c) == own[c] for c in range(12)])
        v = m.SQLITE_LIMIT_VARIABLE_NUMBER
        rec("set variables", lambda: con.setlimit(v, 1) == own[v])
        rec("get variables", lambda: con.getlimit(v))
        rec("one variable", lambda: con.execute("SELECT ? + 1", (1,)).fetchall())
        rec("two variables", lambda: con.execute("SELECT ? + ?", (1, 2)).fetchall())
        rec("put back", lambda: con.setlimit(v, own[v]))
        rec("two again", lambda: con.execute("SELECT ? + ?", (1, 2)).fetchall())
        f = m.SQLITE_LIMIT_FUNCTION_ARG
        con.setlimit(f, 1)
        rec("one argument", lambda: con.execute("SELECT abs(-1)").fetchall())
        rec("two arguments", lambda: con.execute("SELECT max(1, 2)").fetchall())
        con.setlimit(f, own[f])
        s = m.SQLITE_LIMIT_SQL_LENGTH
        con.setlimit(s, 40)
        rec("sql length", lambda: con.getlimit(s))
        rec("short", lambda: con.execute("SELECT 1".ljust(40)).fetchall())
        rec("long", lambda: con.execute("SELECT 2".ljust(41)).fetchall())
        rec("long many", lambda: con.executemany("INSERT INTO ev(cents) VALUES (?)".ljust(41), [(1,)]))
        rec("long script", lambda: con.executescript("SELECT 3;".ljust(41)))
        rec("served query too long", lambda: con.execute(
            "SELECT country, SUM(cents) FROM ev GROUP BY country").fetchall())
        con.setlimit(s, own[s])
        rec("served query", lambda: con.execute(
            "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY 1").fetchall())
        c = m.SQLITE_LIMIT_COLUMN
        con.setlimit(c, 2)
        rec("three columns", lambda: con.execute("SELECT 1, 2, 3").fetchall())
        rec("create wide", lambda: con.execute("CREATE TABLE wide(a, b, c)"))
        con.setlimit(c, own[c])
        e = m.SQLITE_LIMIT_COMPOUND_SELECT
        con.setlimit(e, 2)
        rec("compound", lambda: con.execute("SELECT 1 UNION SELECT 2 UNION SELECT 3").fetchall())
        con.setlimit(e, own[e])
        t = m.SQLITE_LIMIT_TRIGGER_DEPTH
        rec("trigger depth", lambda: (con.setlimit(t, 5) == own[t], con.getlimit(t)))
        a = m.SQLITE_LIMIT_ATTACHED
        con.setlimit(a, 0)
        rec("attach none", lambda: con.execute("ATTACH ':memory:' AS x"))
        con.setlimit(a, own[a])
        rec("raised above SQLite's bound", lambda: con.setlimit(m.SQLITE_LIMIT_COLUMN, 10**9) == own[c])
        rec("bound", lambda: con.getlimit(m.SQLITE_LIMIT_COLUMN) >= own[c])

    both(script)


def test_lowering_length_is_declined():
    con = pleroma.connect(":memory:")
    length = con.getlimit(pleroma.SQLITE_LIMIT_LENGTH)
    for cat in (pleroma.SQLITE_LIMIT_LENGTH, pleroma.SQLITE_LIMIT_LIKE_PATTERN_LENGTH):
        own = con.getlimit(cat)
        with pytest.raises(pleroma.NotSupportedError, match="lowering limit"):
            con.setlimit(cat, 128)
        assert con.getlimit(cat) == own
        assert con.setlimit(cat, own) == own
    assert con.getlimit(pleroma.SQLITE_LIMIT_LENGTH) == length
    con.close()


def test_limits_do_not_reach_pleromas_statements(tmp_path):
    """Limits SQLite checks while preparing apply to the program's
    statements only: Pleroma's reads of its catalog and writes of its
    persisted state run as before."""
    con = pleroma.connect(str(tmp_path / "p.db"))
    _ev(pleroma, con)
    for cat in (pleroma.SQLITE_LIMIT_SQL_LENGTH, pleroma.SQLITE_LIMIT_COLUMN,
                pleroma.SQLITE_LIMIT_EXPR_DEPTH, pleroma.SQLITE_LIMIT_FUNCTION_ARG,
                pleroma.SQLITE_LIMIT_VARIABLE_NUMBER, pleroma.SQLITE_LIMIT_VDBE_OP,
                pleroma.SQLITE_LIMIT_COMPOUND_SELECT):
        con.setlimit(cat, {pleroma.SQLITE_LIMIT_SQL_LENGTH: 80,
                           pleroma.SQLITE_LIMIT_VDBE_OP: 60}.get(cat, 3))
    con.execute("INSERT INTO ev VALUES ('IT', 3, 'd')")
    con.commit()
    other = pleroma.connect(str(tmp_path / "p.db"))
    other.execute("INSERT INTO ev VALUES ('IT', 4, 'e')")
    other.commit()
    assert con.execute("SELECT country, SUM(cents) FROM ev GROUP BY country").fetchall() == \
        [("DE", 6), ("FR", 7), ("IT", 7)]
    assert con.last_route in ("plane", "memo")
    other.close()
    con.close()


def test_callback_tracebacks(both):
    def script(m, con, rec):
        seen = []

        def hook(u):
            seen.append((u.exc_type.__name__, str(u.exc_value),
                         getattr(u.object, "__name__", None)))

        def broken(x):
            return 1 / 0

        def too_big():
            return 2**64

        def trace_fails(sql):
            raise KeyError(sql)

        class Agg:
            def step(self, x):
                raise ValueError("step")

            def finalize(self):
                return 0

        class NoStep:
            def finalize(self):
                return 0

        def authorizer(*args):
            raise RuntimeError("auth")

        def progress():
            raise LookupError("progress")

        con.create_function("broken", 1, broken)
        con.create_function("too_big", 0, too_big)
        con.create_function("oom", 0, lambda: (_ for _ in ()).throw(MemoryError()))
        con.create_aggregate("agg", 1, Agg)
        con.create_aggregate("nostep", 1, NoStep)
        old = sys.unraisablehook
        sys.unraisablehook = hook
        try:
            for flag in (True, False):
                m.enable_callback_tracebacks(flag)
                rec(f"function {flag}", lambda: con.execute("SELECT broken(1)").fetchall())
                rec(f"overflow {flag}", lambda: con.execute("SELECT too_big()").fetchall())
                rec(f"memory {flag}", lambda: con.execute("SELECT oom()").fetchall())
                rec(f"aggregate {flag}", lambda: con.execute("SELECT agg(1)").fetchall())
                rec(f"no step {flag}", lambda: con.execute("SELECT nostep(1)").fetchall())
                con.set_trace_callback(trace_fails)
                rec(f"trace {flag}", lambda: con.execute("SELECT 1").fetchall())
                con.set_trace_callback(None)
                con.set_authorizer(authorizer)
                rec(f"authorizer {flag}", lambda: con.execute("SELECT 2").fetchall())
                con.set_authorizer(None)
                con.set_progress_handler(progress, 1)
                rec(f"progress {flag}", lambda: con.execute("SELECT 3").fetchall())
                con.set_progress_handler(None, 1)
                rec(f"reported {flag}", lambda: list(seen))
                del seen[:]
        finally:
            sys.unraisablehook = old
            m.enable_callback_tracebacks(False)

    both(script)
