"""Incremental BLOB I/O (`Connection.blobopen`), twin against sqlite3; and
the refusal of a blob write to a table with a plane."""

import array
import os
import sqlite3

import pytest

import pleroma

DATA = b"this blob data string is exactly fifty bytes long!"


def _norm(m, f):
    """``f()``, or its exception with the module's name taken out of the
    message (``sqlite3.Blob`` and ``pleroma.Blob`` are ``Blob``)."""
    try:
        return ("value", f())
    except Exception as e:  # noqa: BLE001 (every error is an observation)
        return ("raised", type(e).__name__, str(e).replace(m.__name__ + ".", ""))


def _table(con):
    con.execute("CREATE TABLE test(b BLOB, n INTEGER)")
    con.execute("INSERT INTO test(b, n) VALUES (?, 1)", (DATA,))
    con.commit()


def test_read_seek_and_write(both):
    def script(m, con, rec):
        _table(con)
        blob = con.blobopen("test", "b", 1)
        rec("is Blob", lambda: type(blob) is m.Blob)
        rec("len", lambda: len(blob))
        rec("read all", blob.read)
        rec("at end", blob.read)
        rec("tell", blob.tell)
        for args in ((10,), (10, os.SEEK_SET), (10, os.SEEK_CUR), (-10, os.SEEK_END), (0, 0)):
            rec(f"seek {args}", lambda args=args: (blob.seek(*args), blob.tell()))
        rec("read 10", lambda: blob.read(10))
        rec("read oversized", lambda: blob.read(1000))
        blob.seek(5)
        rec("read negative", lambda: blob.read(-3))
        for args in ((1000,), (-10,), (10, -1), (10, 3), ("a",), (2**31,)):
            rec(f"seek error {args}", lambda args=args: blob.seek(*args))
        blob.seek(1)
        rec("seek overflow cur", lambda: blob.seek(2**31 - 1, os.SEEK_CUR))
        rec("seek overflow end", lambda: blob.seek(2**31 - 1, os.SEEK_END))
        blob.seek(0)
        rec("write", lambda: blob.write(b"new data".ljust(20)))
        rec("tell after write", blob.tell)
        rec("stored", lambda: con.execute("SELECT b FROM test").fetchone())
        rec("write too long", lambda: blob.write(b"a" * 1000))
        blob.seek(49)
        rec("write last", lambda: blob.write(b"."))
        rec("write past end", lambda: blob.write(b"a"))
        blob.seek(0)
        rec("write memoryview", lambda: blob.write(memoryview(b"12345")))
        rec("write bytearray", lambda: blob.write(bytearray(b"23456")))
        rec("write array", lambda: blob.write(array.array("b", [1, 2, 3])))
        rec("write str", lambda: blob.write("text"))
        rec("write strided", lambda: blob.write(memoryview(b"abcdef")[::2]))
        rec("stored after", lambda: con.execute("SELECT b FROM test").fetchone())
        rec("in_transaction", lambda: con.in_transaction)
        blob.close()
        con.commit()
        rec("committed", lambda: con.execute("SELECT b, n FROM test").fetchall())

    both(script)


def test_index_and_slice(both):
    def script(m, con, rec):
        _table(con)
        blob = con.blobopen("test", "b", 1)
        for i in (0, 5, -1, -50):
            rec(f"get {i}", lambda i=i: blob[i])
        for i in (50, 105, -105, 2**64):
            rec(f"get error {i}", lambda i=i: blob[i])
        for s in (slice(5, 14), slice(5, 5), slice(5, -5), slice(0, 10, 2), slice(None),
                  slice(40, None), slice(10, 0), slice(None, None, 7)):
            rec(f"get {s}", lambda s=s: blob[s])
        rec("get float", lambda: blob[1.5])
        rec("get str", lambda: blob["a"])
        rec("get float slice", lambda: blob[5:5.5])
        rec("set 0", lambda: blob.__setitem__(0, ord("T")))
        rec("set -1", lambda: blob.__setitem__(-1, 255))
        rec("read back", lambda: (blob[0], blob[-1]))
        for v in (b"multiple", b"1", bytearray(b"1"), -1, 256, 2**65, 1.5, True):
            rec(f"set value {v!r}", lambda v=v: blob.__setitem__(0, v))
            rec(f"set value {v!r} out", lambda v=v: blob.__setitem__(1000, v))
        rec("set index out", lambda: blob.__setitem__(1000, 0))
        rec("set str index", lambda: blob.__setitem__("a", b"b"))
        rec("del item", lambda: blob.__delitem__(0))
        rec("del slice", lambda: blob.__delitem__(slice(5, 10)))
        rec("set slice", lambda: blob.__setitem__(slice(0, 5), b"12345"))
        rec("set slice step", lambda: blob.__setitem__(slice(0, 10, 2), b"abcde"))
        rec("set empty slice", lambda: blob.__setitem__(slice(3, 3), b""))
        rec("set slice array", lambda: blob.__setitem__(slice(0, 5), array.array("b", [1, 2, 3, 4, 5])))
        rec("set slice short", lambda: blob.__setitem__(slice(5, 10), b"a"))
        rec("set slice long", lambda: blob.__setitem__(slice(5, 10), b"a" * 1000))
        rec("set slice step 0", lambda: blob.__setitem__(slice(5, 10, 0), b"12345"))
        rec("set slice strided", lambda: blob.__setitem__(slice(5, 10), memoryview(b"abcdefghij")[::2]))
        rec("set slice str", lambda: blob.__setitem__(slice(0, 2), "ab"))
        rec("whole", lambda: blob[:])
        rec("add", lambda: _norm(m, lambda: blob + blob))
        rec("mul", lambda: _norm(m, lambda: blob * 5))
        rec("contains", lambda: _norm(m, lambda: b"a" in blob))
        rec("iter", lambda: _norm(m, lambda: list(blob)))
        rec("stored", lambda: con.execute("SELECT b FROM test").fetchone())
        blob.close()

    both(script)


def test_open_close_and_errors(both):
    def script(m, con, rec):
        _table(con)
        con.execute("INSERT INTO test(rowid, b) VALUES (?, zeroblob(3))", (2**32,))
        con.execute("CREATE TABLE keyed(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID")
        con.execute("CREATE INDEX test_n ON test(n)")
        con.commit()
        for args, kw in ((("test", "b", 1), {"name": "nosuchdb"}),
                         (("nosuch", "b", 1), {}),
                         (("test", "nosuch", 1), {}),
                         (("test", "b", 3), {}),
                         (("test", "n", 1), {}),
                         (("keyed", "v", 1), {}),
                         (("test", "b", 2**64), {}),
                         ((1, "b", 1), {})):
            rec(f"open {args} {kw}", lambda args=args, kw=kw: _norm(m, lambda: con.blobopen(*args, **kw)))
        rec("open indexed read-only", lambda: con.blobopen("test", "n", 1, readonly=True).read())
        rec("32-bit rowid", lambda: con.blobopen("test", "b", 2**32).read())
        rec("new Blob", lambda: _norm(m, lambda: m.Blob()))
        ro = con.blobopen("test", "b", 1, readonly=True)
        rec("read-only write", lambda: ro.write(b"aaa"))
        rec("read-only set", lambda: ro.__setitem__(0, 1))
        rec("read-only read", lambda: ro.read(4))
        ro.close()
        with con.blobopen("test", "b", 1) as blob:
            blob.write(b"a" * 50)
        rec("after with", lambda: con.execute("SELECT b FROM test WHERE rowid = 1").fetchone())
        rec("closed by with", lambda: blob.read())
        for name, f in (("read", blob.read), ("write", lambda: blob.write(b"")),
                        ("seek", lambda: blob.seek(0)), ("tell", blob.tell),
                        ("enter", blob.__enter__), ("exit", lambda: blob.__exit__(None, None, None)),
                        ("len", lambda: len(blob)), ("get", lambda: blob[0]),
                        ("get slice", lambda: blob[0:1]), ("set", lambda: blob.__setitem__(0, b""))):
            rec(f"closed {name}", f)
        rec("close twice", blob.close)

        class Raised(Exception):
            pass

        def reraise():
            with con.blobopen("test", "b", 1):
                raise Raised("reraised")
        rec("with reraises", reraise)

        blob = con.blobopen("test", "b", 1)
        con.execute("UPDATE test SET b = 'aaaa' WHERE rowid = 1")
        rec("row changed len", lambda: len(blob))
        rec("row changed read", blob.read)
        rec("row changed get", lambda: blob[0])
        rec("row changed len after", lambda: len(blob))
        rec("row changed write", lambda: blob.write(b"a"))
        blob.close()
        con.rollback()
        blob = con.blobopen("test", "b", 1)
        con.close()
        rec("closed database read", blob.read)
        rec("closed database close", blob.close)

    both(script)


def test_blob_in_a_transaction_and_file(both):
    """Writes through a blob in an open transaction are rolled back with
    it; in autocommit they commit when the blob closes."""
    def script(m, con, rec):
        _table(con)
        con.execute("INSERT INTO test(b) VALUES (zeroblob(4))")
        with con.blobopen("test", "b", 2) as blob:
            blob.write(b"abcd")
        con.rollback()
        rec("rolled back", lambda: con.execute("SELECT b FROM test WHERE rowid = 2").fetchall())
        con.isolation_level = None
        with con.blobopen("test", "b", 1) as blob:
            blob[0:4] = b"WXYZ"
        rec("autocommit", lambda: con.execute("SELECT substr(b, 1, 6) FROM test").fetchall())
        other = m.connect(con.execute("PRAGMA database_list").fetchone()[2])
        rec("seen by another connection", lambda: other.execute("SELECT substr(b, 1, 6) FROM test").fetchall())
        other.close()

    both(script)


def test_write_refused_on_a_planed_table(tmp_path):
    """A blob write passes by the change hook and a persisted plane's guard:
    refused on a table with a plane, at the open and at each write (a plane
    attached since), and on Pleroma's own tables; reading is allowed, and
    the planes keep answering as plain SQLite does. (On a file the plane's
    guard index already makes SQLite refuse to open the plane's own columns
    for writing.)"""
    plain = sqlite3.connect(str(tmp_path / "plain.db"))
    con = pleroma.connect(str(tmp_path / "planed.db"))
    for c in (plain, con):
        c.execute("CREATE TABLE ev(country TEXT, cents INTEGER, doc BLOB)")
        c.execute("CREATE TABLE notes(doc BLOB)")
        c.executemany("INSERT INTO ev VALUES (?, ?, zeroblob(8))", [("DE", 5), ("FR", 7), ("DE", 1)])
        c.execute("INSERT INTO notes VALUES (zeroblob(8))")
        c.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")

    # Reading is always allowed, and reads what sqlite3 reads.
    with con.blobopen("ev", "doc", 1, readonly=True) as ours, \
            plain.blobopen("ev", "doc", 1, readonly=True) as theirs:
        assert ours.read() == theirs.read()
    with pytest.raises(pleroma.OperationalError, match="table ev has a plane"):
        con.blobopen("ev", "doc", 1)
    with pytest.raises(pleroma.OperationalError, match="cannot open indexed column"):
        con.blobopen("ev", "country", 1)
    with pytest.raises(pleroma.OperationalError, match="Pleroma's own"):
        con.blobopen("pleroma_catalog", "dims", 1)
    # A table without a plane takes writes as in sqlite3, inside a
    # transaction: outside one, on a connection with planes, a blob open for
    # writing would hold a transaction that Pleroma's own around a write to
    # the planed table could not commit past.
    with pytest.raises(pleroma.OperationalError, match="only inside a transaction"):
        con.blobopen("notes", "doc", 1)
    for c in (plain, con):
        c.execute("BEGIN")
        with c.blobopen("notes", "doc", 1) as blob:
            blob.write(b"abcd")
            c.execute("INSERT INTO ev VALUES ('IT', 2, NULL)")
            blob.write(b"efgh")
        c.commit()
    assert con.execute("SELECT doc FROM notes").fetchall() == \
        plain.execute("SELECT doc FROM notes").fetchall()

    # A plane attached while a write handle is open (on a connection that
    # had none): the next write is refused (SQLite checks the indexes only
    # at the open).
    late = pleroma.connect(str(tmp_path / "late.db"))
    late.execute("CREATE TABLE late(k TEXT, v INTEGER, doc BLOB)")
    late.execute("INSERT INTO late VALUES ('a', 1, zeroblob(4))")
    late.commit()
    blob = late.blobopen("late", "doc", 1)
    blob.write(b"ab")
    late.execute("PRAGMA pleroma_attach('late', 'k', 'v')")
    with pytest.raises(pleroma.OperationalError, match="has a plane"):
        blob.write(b"cd")
    with pytest.raises(pleroma.OperationalError, match="has a plane"):
        blob[0] = 1
    blob.close()
    assert late.execute("SELECT k, SUM(v) FROM late GROUP BY k").fetchall() == [("a", 1)]
    assert late.last_route in ("plane", "memo")
    late.close()

    # Another file's planed table, attached under another name.
    other = pleroma.connect(str(tmp_path / "other.db"))
    other.execute("ATTACH ? AS aux", (str(tmp_path / "planed.db"),))
    with pytest.raises(pleroma.OperationalError, match="indexed column|guard"):
        other.blobopen("ev", "doc", 1, name="aux")
    other.blobopen("ev", "doc", 1, name="aux", readonly=True).close()
    other.close()

    # The plane still answers exactly as plain SQLite.
    sql = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    assert con.execute(sql).fetchall() == plain.execute(sql).fetchall()
    assert con.last_route in ("plane", "memo")
    con.close()
    plain.close()


def test_write_refused_on_a_plane_in_memory():
    """Without a persisted plane's guard (in memory) it is Pleroma that
    refuses; the plane stays exact."""
    con = pleroma.connect(":memory:")
    con.execute("CREATE TABLE ev(country TEXT, cents INTEGER, doc BLOB)")
    con.executemany("INSERT INTO ev VALUES (?, ?, zeroblob(4))", [("DE", 5), ("FR", 7)])
    con.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    for column, args in (("doc", {}), ("country", {}), ("doc", {"name": "main"})):
        with pytest.raises(pleroma.OperationalError, match="table ev has a plane"):
            con.blobopen("ev", column, 1, **args)
    with pytest.raises(pleroma.OperationalError, match="table EV has a plane"):
        con.blobopen("EV", "doc", 1)
    with pytest.raises(pleroma.OperationalError, match="Pleroma's own"):
        con.blobopen("pleroma_catalog", "dims", 1)
    assert con.blobopen("ev", "country", 2, readonly=True).read() == b"FR"
    con.execute("CREATE TABLE notes(doc BLOB)")
    con.execute("INSERT INTO notes VALUES (zeroblob(2))")
    con.commit()
    with pytest.raises(pleroma.OperationalError, match="only inside a transaction"):
        con.blobopen("notes", "doc", 1)
    con.execute("BEGIN")
    with con.blobopen("notes", "doc", 1) as blob:
        blob.write(b"ok")
    con.commit()
    assert con.execute("SELECT doc FROM notes").fetchall() == [(b"ok",)]
    sql = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
    assert con.execute(sql).fetchall() == [("DE", 5), ("FR", 7)]
    assert con.last_route in ("plane", "memo")
    con.close()


def test_write_allowed_once_the_plane_is_detached(tmp_path):
    con = pleroma.connect(str(tmp_path / "p.db"))
    con.execute("CREATE TABLE ev(country TEXT, cents INTEGER, doc BLOB)")
    con.execute("INSERT INTO ev VALUES ('DE', 5, zeroblob(2))")
    con.commit()
    con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
    with pytest.raises(pleroma.OperationalError, match="has a plane"):
        con.blobopen("ev", "doc", 1)
    con.execute("PRAGMA pleroma_detach('ev')")
    assert con.execute("PRAGMA pleroma_planes").fetchall() == []
    with con.blobopen("ev", "doc", 1) as blob:
        blob.write(b"ok")
    con.commit()
    assert con.execute("SELECT doc FROM ev").fetchall() == [(b"ok",)]
    con.close()


def test_commit_while_a_blob_is_open(both):
    """A COMMIT with a blob open for writing fails as in SQLite, with the
    plane's state row written before it; the transaction goes on, and its
    end is exact on reopening."""
    def script(m, con, rec):
        con.execute("CREATE TABLE ev(country TEXT, cents INTEGER)")
        con.execute("CREATE TABLE notes(doc BLOB)")
        con.execute("INSERT INTO ev VALUES ('DE', 5)")
        con.execute("INSERT INTO notes VALUES (zeroblob(4))")
        con.commit()
        if m is pleroma:
            con.execute("PRAGMA pleroma_attach('ev', 'country', 'cents')")
        sql = "SELECT country, SUM(cents) FROM ev GROUP BY country ORDER BY country"
        con.execute("BEGIN")
        blob = con.blobopen("notes", "doc", 1)
        blob.write(b"ab")
        con.execute("INSERT INTO ev VALUES ('FR', 7)")
        rec("commit", con.commit)
        rec("in transaction", lambda: con.in_transaction)
        rec("inside", lambda: con.execute(sql).fetchall())
        blob.write(b"cd")
        blob.close()
        rec("commit again", con.commit)
        rec("after", lambda: (con.execute(sql).fetchall(),
                              con.execute("SELECT doc FROM notes").fetchall()))
        path = con.execute("PRAGMA database_list").fetchone()[2]
        with m.connect(path) as again:
            rec("reopened", lambda: again.execute(sql).fetchall())
            again.execute("INSERT INTO ev VALUES ('IT', 1)")
            again.commit()
            rec("written after", lambda: again.execute(sql).fetchall())
        rec("followed", lambda: con.execute(sql).fetchall())

    both(script)
