"""Implicit transactions and the context manager, twin against sqlite3."""

import sys

import pytest

import pleroma
from conftest import Recorder


def _state(m, con, rec, label):
    rec(label + " in_transaction", lambda: con.in_transaction)


def test_implicit_transactions(both):
    def script(m, con, rec):
        _state(m, con, rec, "start")
        con.execute("CREATE TABLE t(a)")
        _state(m, con, rec, "after DDL")
        con.execute("SELECT * FROM t")
        _state(m, con, rec, "after SELECT")
        con.execute("INSERT INTO t VALUES (1)")
        _state(m, con, rec, "after INSERT")
        con.commit()
        _state(m, con, rec, "after commit")
        con.execute("  \n\tUPDATE t SET a = 2")
        con.rollback()
        rec("rolled back", lambda: con.execute("SELECT a FROM t").fetchall())
        con.execute("REPLACE INTO t VALUES (3)")
        _state(m, con, rec, "after REPLACE")
        con.execute("DELETE FROM t WHERE a = 1")
        con.commit()
        rec("kept", lambda: con.execute("SELECT a FROM t").fetchall())
        con.execute("BEGIN")
        con.execute("INSERT INTO t VALUES (4)")
        con.execute("SAVEPOINT s")
        con.execute("INSERT INTO t VALUES (5)")
        con.execute("ROLLBACK TO s")
        con.commit()
        rec("savepoint", lambda: con.execute("SELECT a FROM t ORDER BY a").fetchall())
        rec("commit outside", con.commit)
        rec("rollback outside", con.rollback)
        rec("begin twice", lambda: (con.execute("BEGIN"), con.execute("BEGIN")))
        con.rollback()
        rec("levels", lambda: con.isolation_level)
        con.isolation_level = "IMMEDIATE"
        con.execute("INSERT INTO t VALUES (6)")
        _state(m, con, rec, "immediate")
        con.isolation_level = None  # commits the open transaction
        _state(m, con, rec, "set None")
        con.execute("INSERT INTO t VALUES (7)")
        _state(m, con, rec, "autocommit insert")
        rec("bad level", lambda: setattr(con, "isolation_level", "SOMETIMES"))
        rec("bad level type", lambda: setattr(con, "isolation_level", 5))
        rec("rows", lambda: con.execute("SELECT a FROM t ORDER BY a").fetchall())
    both(script)


def test_context_manager(both):
    def script(m, con, rec):
        con.execute("CREATE TABLE t(a UNIQUE)")
        with con:
            con.execute("INSERT INTO t VALUES (1)")
        _state(m, con, rec, "after with")

        def failing():
            with con:
                con.execute("INSERT INTO t VALUES (2)")
                con.execute("INSERT INTO t VALUES (1)")
        rec("failing with", failing)
        _state(m, con, rec, "after failed with")
        rec("rows", lambda: con.execute("SELECT a FROM t").fetchall())

        def raising():
            with con:
                con.execute("INSERT INTO t VALUES (3)")
                raise KeyError("mine")
        rec("raising with", raising)
        rec("rows after raise", lambda: con.execute("SELECT a FROM t").fetchall())
        rec("with returns", lambda: con.__enter__() is con)
    both(script)


def test_executescript_commits_first(both):
    def script(m, con, rec):
        con.execute("CREATE TABLE t(a)")
        con.execute("INSERT INTO t VALUES (1)")
        con.executescript("INSERT INTO t VALUES (2); SELECT * FROM t;")
        _state(m, con, rec, "after script")
        con.rollback()
        rec("rows", lambda: con.execute("SELECT a FROM t ORDER BY a").fetchall())
        con.executescript("BEGIN; INSERT INTO t VALUES (3);")
        _state(m, con, rec, "script left a transaction")
        con.rollback()
        rec("rows after", lambda: con.execute("SELECT a FROM t ORDER BY a").fetchall())
    both(script)


def test_changes_on_close_are_rolled_back(tmp_path):
    import sqlite3

    for m in (sqlite3, pleroma):
        p = str(tmp_path / (m.__name__ + ".db"))
        con = m.connect(p)
        con.execute("CREATE TABLE t(a)")
        con.execute("INSERT INTO t VALUES (1)")
        con.close()
        con = m.connect(p)
        assert con.execute("SELECT count(*) FROM t").fetchall() == [(0,)], m.__name__
        con.close()


def test_executemany_is_all_or_nothing(tmp_path):
    # A difference from sqlite3 (docs/python.md): a failed row undoes the
    # rows the same call wrote before it, in every transaction mode.
    for level in ("", None):
        con = pleroma.connect(str(tmp_path / f"m{level!r}.db"), isolation_level=level)
        con.execute("CREATE TABLE t(a UNIQUE)")
        con.execute("INSERT INTO t VALUES (0)")
        con.commit()
        with pytest.raises(pleroma.IntegrityError, match="UNIQUE constraint failed: t.a"):
            con.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (0,), (3,)])
        assert con.execute("SELECT a FROM t").fetchall() == [(0,)]
        with pytest.raises(pleroma.ProgrammingError, match="Incorrect number of bindings"):
            con.executemany("INSERT INTO t VALUES (?)", [(1,), (2, 3)])
        with pytest.raises(pleroma.ProgrammingError, match="type 'dict' is not supported"):
            con.executemany("INSERT INTO t VALUES (?)", [(1,), ({},)])
        con.commit()
        assert con.execute("SELECT a FROM t").fetchall() == [(0,)]
        assert con.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)]).rowcount == 2
        con.commit()
        assert con.execute("SELECT count(*) FROM t").fetchall() == [(3,)]
        con.close()


@pytest.mark.parametrize("mode", [True, False])
def test_autocommit_attribute(tmp_path, mode):
    # Python 3.12's `autocommit`; checked against sqlite3 where it has it.
    import sqlite3

    mods = [pleroma] + ([sqlite3] if sys.version_info >= (3, 12) else [])
    seen = []
    for m in mods:
        con = m.connect(str(tmp_path / f"{m.__name__}.db"), autocommit=mode)
        out = [con.autocommit, con.in_transaction]
        con.execute("CREATE TABLE t(a)")
        con.execute("INSERT INTO t VALUES (1)")
        out.append(con.in_transaction)
        con.rollback()
        out.append(con.execute("SELECT count(*) FROM t").fetchall() if mode else None)
        out.append(con.in_transaction)
        con.commit()
        out.append(con.in_transaction)
        con.close()
        seen.append(out)
    assert seen[0] == ([True, False, False, [(1,)], False, False] if mode
                       else [False, True, True, None, True, True])
    assert all(s == seen[0] for s in seen)


def test_trace_callback(both):
    def script(m, con, rec):
        seen = []
        con.set_trace_callback(seen.append)
        con.execute("CREATE TABLE t(a)")
        con.execute("INSERT INTO t VALUES (?)", (1,))
        con.executemany("INSERT INTO t VALUES (?)", [(2,), (3,)])
        con.commit()
        with con:
            con.execute("UPDATE t SET a = a + ?", ("x",))
        con.executescript("INSERT INTO t VALUES (4); DELETE FROM t WHERE a = 4;")
        con.rollback()
        con.set_trace_callback(None)
        con.execute("SELECT 1")
        rec("traced", lambda: seen)
    both(script)


def test_second_outside_round(tmp_path):
    """What the second outside attack found, each twin against sqlite3
    (rollback journal, no busy timeout, the lock holder of the same
    module: two SQLite libraries in one process do not see each other's
    locks)."""
    import sqlite3

    seen = {}
    for m in (sqlite3, pleroma):
        rec = Recorder()

        p = str(tmp_path / f"{m.__name__}.db")
        setup = m.connect(p)
        setup.execute("CREATE TABLE f(a TEXT, m INTEGER CHECK (m < 1000))")
        setup.commit()
        setup.close()
        reader = m.connect(p, timeout=0)
        a = m.connect(p, timeout=0, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM f").fetchall()
        # executemany in autocommit whose commit meets the reader's lock
        rec("many", lambda: a.executemany("INSERT INTO f VALUES (?, ?)", [("x", 1), ("y", 2)]))
        rec("many in_transaction", lambda: a.in_transaction)
        reader.rollback()
        rec("later", lambda: a.execute("INSERT INTO f VALUES ('later', 3)").rowcount)
        # trace strings as written
        traced = []
        a.set_trace_callback(traced.append)
        a.execute("SELECT 'a';")
        a.execute("  /* lead */ SELECT 2  ;")
        rec("no such table", lambda: a.execute("SELECT * FROM nosuch"))
        a.executescript("SELECT 3; SELECT 4 ;\n  SELECT 5")
        a.set_trace_callback(None)
        rec("traced", lambda: traced)
        # a collation that raises; a function returning an int past 64 bits
        a.create_collation("bad", lambda x, y: 1 // 0)
        rec("bad collation", lambda: a.execute(
            "SELECT a FROM f ORDER BY a COLLATE bad").fetchall())
        a.create_function("big", 0, lambda: 2**64)
        rec("big", lambda: a.execute("SELECT big()").fetchall())
        a.close()
        b = m.connect(p)
        rec("rows", lambda: b.execute("SELECT a, m FROM f ORDER BY a").fetchall())
        b.close()
        seen[m.__name__] = rec.seen
    assert seen["sqlite3"] == seen["pleroma"]


def test_a_prepare_that_meets_a_lock_opens_no_transaction(tmp_path):
    import sqlite3

    seen = {}
    for m in (sqlite3, pleroma):
        p = str(tmp_path / f"p{m.__name__}.db")
        fresh = m.connect(p, timeout=0)
        fresh.execute("SELECT 1")
        holder = m.connect(p, isolation_level=None)
        # A schema the fresh connection has not read, then a lock.
        holder.execute("CREATE TABLE f(a)")
        holder.execute("BEGIN EXCLUSIVE")
        out = []
        try:
            fresh.execute("INSERT INTO f VALUES (1)")
        except m.OperationalError:
            # sqlite3 says "no such table: f" (its schema is not read
            # again), Pleroma "database is locked" (it reads the file's
            # state first): a message, not a state.
            out.append("failed")
        out.append(fresh.in_transaction)
        holder.execute("ROLLBACK")
        fresh.execute("BEGIN")
        fresh.execute("INSERT INTO f VALUES (2)")
        fresh.commit()
        out.append(fresh.execute("SELECT a FROM f").fetchall())
        fresh.close()
        holder.close()
        seen[m.__name__] = out
    assert seen["sqlite3"] == seen["pleroma"]
