"""Pleroma's own parts from Python: served routes, PRAGMAs, threads
sharing planes, Arrow and pandas."""

import random
import sqlite3
import sys
import threading

import pytest

import pleroma
from conftest import Recorder

COUNTRIES = ["DE", "FR", "IT", "ES", None]


def _load(con, rows, seed):
    rng = random.Random(seed)
    con.executemany(
        "INSERT INTO ev(country, day, cents) VALUES (?, ?, ?)",
        [(rng.choice(COUNTRIES), rng.randrange(30), rng.randrange(-500, 5000)) for _ in range(rows)],
    )


QUERIES = [
    ("SELECT country, SUM(cents), COUNT(*) FROM ev GROUP BY country ORDER BY country", ()),
    ("SELECT SUM(cents) FROM ev WHERE country = ?", ("DE",)),
    ("SELECT day, MIN(cents), MAX(cents) FROM ev WHERE day < ? GROUP BY day ORDER BY day", (10,)),
    ("SELECT COUNT(*), AVG(cents) FROM ev WHERE country IN ('FR', 'IT')", ()),
    ("SELECT country, day, SUM(cents) FROM ev GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 5", ()),
]


def test_served_before_and_after_writes(tmp_path):
    twin = sqlite3.connect(str(tmp_path / "plain.db"))
    con = pleroma.connect(str(tmp_path / "planed.db"))
    for c in (twin, con):
        c.execute("CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, day INTEGER, cents INTEGER)")
        _load(c, 2000, 1)
        c.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country, day', 'cents')")
    rng = random.Random(2)
    for round_ in range(6):
        for sql, params in QUERIES:
            got = con.execute(sql, params).fetchall()
            assert con.last_route in ("plane", "memo", "residue"), (sql, con.last_route_reason)
            assert got == twin.execute(sql, params).fetchall(), (round_, sql)
            assert [type(v) for r in got for v in r] == \
                [type(v) for r in twin.execute(sql, params).fetchall() for v in r]
        # Writes from Python, some inside a transaction that is rolled back.
        writes = [
            ("INSERT INTO ev(country, day, cents) VALUES (?, ?, ?)",
             (rng.choice(COUNTRIES), rng.randrange(30), rng.randrange(1000))),
            ("UPDATE ev SET cents = cents + ? WHERE day = ?", (rng.randrange(100), rng.randrange(30))),
            ("DELETE FROM ev WHERE id % 7 = ?", (rng.randrange(7),)),
            ("UPDATE ev SET country = ? WHERE id % 11 = 0", (rng.choice(COUNTRIES),)),
        ]
        for c in (twin, con):
            for sql, params in writes:
                c.execute(sql, params)
            if round_ % 2:
                c.rollback()
            else:
                c.commit()
        # Reads inside an open transaction see its own writes.
        for c in (twin, con):
            c.execute("INSERT INTO ev(country, day, cents) VALUES ('DE', 1, 99)")
        sql = "SELECT SUM(cents) FROM ev WHERE country = 'DE'"
        assert con.execute(sql).fetchall() == twin.execute(sql).fetchall()
        assert con.last_route in ("plane", "memo")
        for c in (twin, con):
            c.commit()
    con.close()
    twin.close()


def test_pragmas_through_execute(tmp_path):
    con = pleroma.connect(str(tmp_path / "p.db"))
    con.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
    con.execute("INSERT INTO ev VALUES ('DE', 1)")
    con.commit()
    assert con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')").fetchall() is not None
    planes = con.execute("PRAGMA pleroma_planes")
    names = [d[0] for d in planes.description]
    assert "table" in names
    assert planes.fetchall()[0][names.index("table")] == "ev"
    con.execute("SELECT SUM(cents) FROM ev")
    assert con.last_route == "plane"
    explain = con.execute("PRAGMA pleroma_explain('SELECT SUM(cents) FROM ev')").fetchall()
    assert explain
    with pytest.raises(pleroma.OperationalError, match="no such table"):
        con.execute("PRAGMA pleroma_attach('nosuch', 'a', 'b')")
    con.close()


def test_threads_share_planes(tmp_path):
    """Four threads, each with its own connection to one file, write and
    read in a seeded order (one step at a time, chosen by the schedule);
    every read is checked against plain SQLite's answer at that moment."""
    path = str(tmp_path / "shared.db")
    setup = pleroma.connect(path)
    setup.execute("PRAGMA journal_mode = wal")
    setup.execute("CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, day INTEGER, cents INTEGER)")
    _load(setup, 500, 3)
    setup.commit()
    setup.execute("PRAGMA pleroma_attach('ev', 'country, day', 'cents')")
    setup.close()
    check = sqlite3.connect(path, check_same_thread=False)

    rng = random.Random(4)
    schedule = [rng.randrange(4) for _ in range(120)]
    turn = threading.Condition()
    state = {"step": 0, "errors": [], "served": 0}

    def worker(me):
        con = pleroma.connect(path)
        wr = random.Random(100 + me)
        while True:
            with turn:
                while state["step"] < len(schedule) and schedule[state["step"]] != me:
                    turn.wait()
                if state["step"] >= len(schedule):
                    break
                try:
                    if wr.random() < 0.4:
                        with con:
                            con.execute("INSERT INTO ev(country, day, cents) VALUES (?, ?, ?)",
                                        (wr.choice(COUNTRIES), wr.randrange(30), wr.randrange(1000)))
                    else:
                        sql, params = QUERIES[wr.randrange(len(QUERIES))]
                        got = con.execute(sql, params).fetchall()
                        if con.last_route != "engine":
                            state["served"] += 1
                        want = check.execute(sql, params).fetchall()
                        if got != want:
                            state["errors"].append((me, sql, got, want))
                except Exception as e:  # noqa: BLE001
                    state["errors"].append((me, repr(e)))
                state["step"] += 1
                turn.notify_all()
        cur = con.execute("PRAGMA pleroma_planes")
        names = [d[0] for d in cur.description]
        state.setdefault("rebuilds", []).append(cur.fetchone()[names.index("rebuilds")])
        con.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check.close()
    assert state["errors"] == []
    assert state["served"] > 30
    # Each commit was followed by the other threads' connections from the
    # shared planes or the persisted log, never by a rebuild.
    assert state["rebuilds"] == [0, 0, 0, 0]


def test_one_connection_across_threads(tmp_path):
    con = pleroma.connect(str(tmp_path / "x.db"), check_same_thread=False)
    con.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
    con.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    errors = []

    def work(i):
        try:
            for j in range(50):
                with con:
                    con.execute("INSERT INTO ev VALUES (?, ?)", (str(i), j))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert con.execute("SELECT country, SUM(cents), COUNT(*) FROM ev GROUP BY country").fetchall() == \
        [(str(i), sum(range(50)), 50) for i in range(4)]
    assert con.last_route == "plane"
    other = pleroma.connect(str(tmp_path / "x.db"))
    with pytest.raises(pleroma.ProgrammingError, match="same thread"):
        threading_result = []
        t = threading.Thread(target=lambda: threading_result.append(_try(other)))
        t.start()
        t.join()
        raise threading_result[0]


def _try(con):
    try:
        con.execute("SELECT 1")
    except Exception as e:  # noqa: BLE001
        return e
    return AssertionError("no error")


def test_arrow_and_pandas_equal_rows(tmp_path):
    import pyarrow as pa
    con = pleroma.connect(str(tmp_path / "a.db"))
    con.execute("CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, day INTEGER, cents INTEGER, r REAL, b BLOB)")
    _load(con, 300, 5)
    con.execute("UPDATE ev SET r = cents / 7.0, b = CAST(country AS BLOB)")
    con.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country, day', 'cents')")
    for sql, params in QUERIES + [("SELECT id, country, day, cents, r, b FROM ev ORDER BY id", ())]:
        rows = con.execute(sql, params).fetchall()
        table = con.execute(sql, params).fetch_arrow_table()
        assert isinstance(table, pa.Table)
        assert [tuple(r.values()) for r in table.to_pylist()] == rows, sql
        df = con.execute(sql, params).df()
        assert list(df.columns) == [d[0] for d in con.execute(sql, params).description]
        assert len(df) == len(rows)
        for r, (_, s) in zip(rows, df.iterrows()):
            for a, b in zip(r, s.tolist()):
                assert (a is None and (b is None or b != b)) or a == b, (sql, r, s.tolist())
    # The rows not fetched yet.
    cur = con.execute("SELECT id FROM ev ORDER BY id LIMIT 5")
    cur.fetchone()
    assert cur.fetch_arrow_table().column(0).to_pylist() == [2, 3, 4, 5]
    assert cur.fetchall() == []
    con.close()


def test_without_pyarrow_the_error_says_what_to_install(monkeypatch):
    con = pleroma.connect(":memory:")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pyarrow"):
        con.execute("SELECT 1").fetch_arrow_table()
    with pytest.raises(ImportError, match="pip install pandas"):
        con.execute("SELECT 1").df()
    con.close()


def test_two_connections_and_locks(tmp_path):
    """Found from outside: a connection opened before another attached a
    plane keeps writing; under another connection's lock (rollback
    journal, no timeout) errors are SQLite's. Twin against sqlite3."""
    seen = {}
    for m in (sqlite3, pleroma):
        rec = Recorder()

        p = str(tmp_path / f"{m.__name__}.db")
        a = m.connect(p, timeout=0)
        b = m.connect(p, timeout=0)
        a.execute("CREATE TABLE f(id INTEGER PRIMARY KEY, a TEXT NOT NULL, m INTEGER)")
        a.execute("CREATE TABLE other(x)")
        a.commit()
        if m is pleroma:
            a.execute("PRAGMA pleroma_attach('f', 'a', 'm')")
        a.execute("INSERT INTO f(a, m) VALUES ('x', 1)")
        rec("b reads", lambda: b.execute("SELECT a, SUM(m) FROM f GROUP BY a").fetchall())
        a.commit()
        rec("b writes", lambda: b.execute("INSERT INTO f(a, m) VALUES ('y', 2)").rowcount)
        b.commit()
        # b reads (a shared lock) while a fails a constraint, in a script.
        b.execute("BEGIN")
        rec("b shared", lambda: b.execute("SELECT count(*) FROM f").fetchall())
        rec("a fails", lambda: a.executescript("INSERT INTO f(a, m) VALUES (NULL, 2);"))
        b.rollback()
        a.execute("INSERT INTO other VALUES (1)")
        a.commit()
        a.execute("BEGIN EXCLUSIVE")
        for sql in ["SELECT count(*) FROM f", "COMMIT", "ROLLBACK", "RELEASE x", "SELECT 1"]:
            rec(sql, lambda sql=sql: b.execute(sql).fetchall())
        a.rollback()
        rec("final", lambda: b.execute("SELECT a, SUM(m) FROM f GROUP BY a ORDER BY a").fetchall())
        a.close()
        b.close()
        seen[m.__name__] = rec.seen
    assert seen["sqlite3"] == seen["pleroma"]


def test_memo_answers_repeat_exactly_and_follow_writes(tmp_path):
    con = pleroma.connect(str(tmp_path / "m.db"))
    con.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
    con.executemany("INSERT INTO ev VALUES (?, ?)", [("DE", 1), ("FR", 2)])
    con.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    q = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    first = con.execute(q).fetchall()
    routes = []
    for _ in range(3):
        got = con.execute(q).fetchall()
        routes.append(con.last_route)
        assert got == first == [("DE", 1), ("FR", 2)]
        got.append("mine")  # the caller's own list
    assert routes == ["memo"] * 3
    con.execute("INSERT INTO ev VALUES ('DE', 10)")
    assert con.execute(q).fetchall() == [("DE", 11), ("FR", 2)]
    con.rollback()
    assert con.execute(q).fetchall() == [("DE", 1), ("FR", 2)]
    cur = con.execute(q)
    assert cur.fetchone() == ("DE", 1)
    assert cur.fetchall() == [("FR", 2)]
    con.close()


def test_backup_into_a_planed_connection_reopens_its_planes(tmp_path):
    """The destination of a backup holds another file now: its planes are
    opened again from what it holds, never answered from before."""
    src = pleroma.connect(str(tmp_path / "src.db"))
    src.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
    src.executemany("INSERT INTO ev VALUES (?, ?)", [("DE", 5), ("FR", 7), ("DE", 1)])
    src.commit()
    src.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    dst = pleroma.connect(str(tmp_path / "dst.db"))
    dst.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
    dst.execute("INSERT INTO ev VALUES ('IT', 100)")
    dst.commit()
    dst.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    other = pleroma.connect(str(tmp_path / "dst.db"))  # shares dst's planes
    q = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    assert dst.execute(q).fetchall() == [("IT", 100)]
    assert other.execute(q).fetchall() == [("IT", 100)]
    steps = []
    src.backup(dst, pages=1, progress=lambda status, remaining, total: steps.append(status))
    assert steps[-1] == pleroma.SQLITE_DONE
    for con in (dst, other):
        assert con.execute(q).fetchall() == [("DE", 6), ("FR", 7)]
        assert con.last_route in ("plane", "memo")
    dst.execute("INSERT INTO ev VALUES ('FR', 1)")
    dst.commit()
    assert other.execute(q).fetchall() == [("DE", 6), ("FR", 8)]
    check = sqlite3.connect(str(tmp_path / "dst.db"))
    assert check.execute(q).fetchall() == [("DE", 6), ("FR", 8)]
    check.close()
    with pytest.raises(ValueError):
        src.backup(src)
    with pytest.raises(TypeError):
        src.backup(check)
    for con in (src, dst, other):
        con.close()
