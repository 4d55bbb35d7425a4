"""Pleroma: SQLite with exact, live OLAP planes, shaped like the ``sqlite3`` module.

``import pleroma as sqlite3`` runs programs written for the standard
module on the same file and SQL; a query a plane answers comes back from
its cells in microseconds. What differs from ``sqlite3`` is listed in
``docs/python.md``.

>>> import pleroma
>>> con = pleroma.connect(":memory:")
>>> _ = con.executescript(
...     "CREATE TABLE ev(country TEXT, cents INTEGER);"
...     "INSERT INTO ev VALUES ('DE', 5), ('FR', 7), ('DE', 1);"
...     "PRAGMA pleroma_attach('ev', 'country', 'cents');")
>>> con.execute("SELECT SUM(cents) FROM ev WHERE country = ?", ("DE",)).fetchall()
[(6,)]
>>> con.last_route
'plane'
"""

import collections.abc as _collections_abc
import operator
import threading
from builtins import callable as builtins_callable
from . import _native
from ._constants import *  # noqa: F401,F403  (SQLite's constants, as sqlite3 exports them)
from ._native import (  # noqa: F401  (the DB-API's names)
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    Warning,
)

__all__ = [
    "connect", "Connection", "Cursor", "Row", "Blob", "PrepareProtocol",
    "register_adapter", "register_converter", "complete_statement",
    "Error", "Warning", "InterfaceError", "DatabaseError", "DataError",
    "OperationalError", "IntegrityError", "InternalError",
    "ProgrammingError", "NotSupportedError",
    "PARSE_DECLTYPES", "PARSE_COLNAMES", "LEGACY_TRANSACTION_CONTROL",
    "apilevel", "threadsafety", "paramstyle", "sqlite_version",
    "sqlite_version_info", "version", "version_info",
]

apilevel = "2.0"
# Connections, and cursors, may be shared between threads: every call
# takes the connection's lock with the GIL released (docs/python.md).
threadsafety = 3
paramstyle = "qmark"
version = "0.1.0"
version_info = (0, 1, 0)
sqlite_version = _native.sqlite_version
sqlite_version_info = tuple(int(x) for x in sqlite_version.split("."))

PARSE_DECLTYPES = 1
PARSE_COLNAMES = 2
LEGACY_TRANSACTION_CONTROL = -1

_LEVELS = ("", "DEFERRED", "IMMEDIATE", "EXCLUSIVE")
# The sqlite3 module's connection methods this package does not have
# (docs/python.md): asking for one raises NotSupportedError, not a
# bare AttributeError.
_NOT_SUPPORTED = frozenset((
    "enable_load_extension", "load_extension", "getconfig", "setconfig",
))
_INT_MAX = 2**31 - 1
# Not given: sqlite3's "no value" for an argument that may be None.
_UNSET = object()
_INFO_CAPACITY = 1024
_ROWS_CAPACITY = 64


class PrepareProtocol:
    """The protocol object adapters are registered for (as in ``sqlite3``)."""


adapters = {}
converters = {}


def register_converter(typename, converter):
    """Convert columns declared (or named) ``typename`` with ``converter(bytes)``."""
    converters[typename.upper()] = converter


# Whether an adapter was registered for int, float, str or bytearray:
# then every value goes through the adapters, as in sqlite3.
_base_adapted = False


def register_adapter(type_, adapter):
    """Bind values of ``type_`` through ``adapter(value)``."""
    global _base_adapted
    if type_ in (int, float, str, bytearray):
        _base_adapted = True
    adapters[(type_, PrepareProtocol)] = adapter


def adapt(obj, proto=PrepareProtocol, alt=_UNSET, /):
    """``obj`` adapted for SQLite as the binding would adapt it: the
    registered adapter, ``proto.__adapt__(obj)``, ``obj.__conform__(proto)``
    (a ``TypeError`` of either passes on to the next), else ``alt``."""
    adapter = adapters.get((type(obj), proto))
    if adapter is not None:
        return adapter(obj)
    for method, arg in ((getattr(proto, "__adapt__", None), obj),
                        (getattr(obj, "__conform__", None), proto)):
        if method is None:
            continue
        try:
            out = method(arg)
        except TypeError:
            continue
        if out is not None:
            return out
    if alt is not _UNSET:
        return alt
    raise ProgrammingError("can't adapt")


def enable_shared_cache(enable):
    """Not supported: SQLite's shared cache changes the locking that the
    planes' following of other connections rests on (docs/python.md)."""
    import warnings

    warnings.warn("enable_shared_cache is deprecated and will be removed in Python 3.12. "
                  "Shared cache is strongly discouraged by the SQLite 3 documentation. "
                  "If shared cache must be used, open the database in URI mode using"
                  "the cache=shared query parameter.", DeprecationWarning, stacklevel=2)
    raise NotSupportedError("pleroma: enable_shared_cache is not supported (docs/python.md)")


_callback_tracebacks = False


def enable_callback_tracebacks(flag, /):
    """Report exceptions in callbacks (functions, aggregates, the
    authorizer, the progress handler, the trace callback) to
    ``sys.unraisablehook``, as ``sqlite3`` does."""
    global _callback_tracebacks
    _callback_tracebacks = bool(flag)
    _native.set_callback_tracebacks(_callback_tracebacks)


def _adapt_date(d):
    return d.isoformat()


def _adapt_datetime(d):
    return d.isoformat(" ")


def _convert_date(val):
    import datetime

    return datetime.date(*map(int, val.split(b"-")))


def _convert_timestamp(val):
    import datetime

    datepart, timepart = val.split(b" ")
    year, month, day = map(int, datepart.split(b"-"))
    timepart_full = timepart.split(b".")
    hours, minutes, seconds = map(int, timepart_full[0].split(b":"))
    if len(timepart_full) == 2:
        microseconds = int("{:0<6.6}".format(timepart_full[1].decode()))
    else:
        microseconds = 0
    return datetime.datetime(year, month, day, hours, minutes, seconds, microseconds)


def _register_default_adapters():
    # sqlite3's defaults (deprecated there since Python 3.12, still present).
    import datetime

    register_adapter(datetime.date, _adapt_date)
    register_adapter(datetime.datetime, _adapt_datetime)
    register_converter("date", _convert_date)
    register_converter("timestamp", _convert_timestamp)


_register_default_adapters()


_BINDABLE = (int, float, str, bytes, bytearray, memoryview)


def _adapt(value, index):
    """A value that is not of an exact built-in type, through its adapter
    or ``__conform__`` (the native binding calls this)."""
    out = adapt(value, PrepareProtocol, value)
    if out is not value or isinstance(value, _BINDABLE):
        return out
    try:
        memoryview(value)  # any buffer binds as a BLOB
    except TypeError:
        raise ProgrammingError(
            f"Error binding parameter {index}: type '{_type_name(type(value))}' "
            "is not supported") from None
    return value


def _adapt_all(values):
    """Every value through the adapters, as sqlite3 binds once an adapter
    was registered for a base type (``_base_adapted``)."""
    if isinstance(values, dict):
        return values
    if isinstance(values, (list, tuple)):
        # By index, to the length it had: an adapter that shortens the
        # list makes it an IndexError, as in sqlite3.
        return [adapt(values[i], PrepareProtocol, values[i]) for i in range(len(values))]
    return [adapt(v, PrepareProtocol, v) for v in values]


def _type_name(t):
    # What CPython's tp_name says: the bare name for a class defined in
    # Python, "module.name" for a type defined in C outside builtins.
    if t.__flags__ & (1 << 9) or t.__module__ == "builtins":  # Py_TPFLAGS_HEAPTYPE
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


Binary = memoryview


def _datetime():
    import datetime

    return datetime


def DateFromTicks(ticks):
    import time

    return _datetime().date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks):
    import time

    return _datetime().time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks):
    import time

    return _datetime().datetime(*time.localtime(ticks)[:6])


def __getattr__(name):
    # Date, Time and Timestamp are datetime's types (imported on first use).
    if name in ("Date", "Time", "Timestamp"):
        d = _datetime()
        return {"Date": d.date, "Time": d.time, "Timestamp": d.datetime}[name]
    if name == "OptimizedUnicode":
        import warnings

        warnings.warn("""
            OptimizedUnicode is deprecated and will be removed in Python 3.12.
            Since Python 3.3 it has simply been an alias for 'str'.
        """, DeprecationWarning, stacklevel=2)
        return str
    raise AttributeError(f"module 'pleroma' has no attribute '{name}'")


def complete_statement(statement):
    """Whether ``statement`` ends in a complete SQL statement (``sqlite3_complete``)."""
    if not isinstance(statement, str):
        raise TypeError("complete_statement() argument must be str")
    return _native.Native.complete(statement)


def _is_dml(sql):
    # As the sqlite3 module (3.11) decides where to begin a transaction and
    # what rowcount counts: the first word after blanks and comments is
    # INSERT, UPDATE, DELETE or REPLACE.
    i, n = 0, len(sql)
    while i < n:
        if sql[i] in " \t\r\n\f":
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            break
    head = sql[i:i + 7].upper()
    return head.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE"))


class _Info:
    """What a statement's text says, read once per text."""

    __slots__ = ("names", "is_dml", "decltypes", "blank", "readonly", "columns", "description",
                 "text")

    def __init__(self, names, is_dml, decltypes, readonly=False):
        self.text = None
        self.blank = False
        self.names = names
        self.is_dml = is_dml
        self.decltypes = decltypes
        self.readonly = readonly
        self.columns = None
        self.description = None


class Row:
    """A result row read by index or by column name (case-insensitive)."""

    __slots__ = ("_keys", "_values")

    def __init__(self, cursor, values):
        if not issubclass(type(cursor), Cursor):
            raise TypeError(
                f"Row() argument 1 must be pleroma.Cursor, not {type(cursor).__name__}")
        if not isinstance(values, tuple):
            raise TypeError(f"Row() argument 2 must be tuple, not {type(values).__name__}")
        desc = cursor.description or ()
        self._keys = tuple(d[0] for d in desc)
        self._values = values

    def keys(self):
        return list(self._keys)

    def __len__(self):
        return len(self._values)

    def __iter__(self):
        return iter(self._values)

    def __getitem__(self, key):
        if isinstance(key, str):
            # ASCII letters only, as sqlite3 compares names.
            folded = key.translate(_ASCII_UPPER)
            for i, k in enumerate(self._keys):
                if k.translate(_ASCII_UPPER) == folded:
                    return self._values[i]
            raise IndexError("No item with that key")
        if isinstance(key, (int, slice)):
            return self._values[key]
        raise IndexError("Index must be int or string")

    def __eq__(self, other):
        if not isinstance(other, Row):
            return NotImplemented
        return self._keys == other._keys and self._values == other._values

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self._keys) ^ hash(self._values)

    def __repr__(self):
        return f"<pleroma.Row object at {id(self):#x}>"


_ASCII_UPPER = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}
_collections_abc.Sequence.register(Row)


class Statement:
    """What calling a connection with SQL returns: the statement, prepared
    (as ``sqlite3``'s ``Connection.__call__``)."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create 'pleroma.Statement' instances")


class Blob:
    """An open BLOB (``Connection.blobopen``): read and written in place,
    as a file (``read``, ``write``, ``seek``, ``tell``) or by index and
    slice, as ``sqlite3``'s ``Blob``."""

    __slots__ = ("_con", "_handle", "_length", "_offset", "__weakref__")
    # A mapping, not a sequence: ``in`` and iteration are refused.
    __iter__ = None

    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create 'pleroma.Blob' instances")

    @staticmethod
    def _open(con, handle, length):
        b = object.__new__(Blob)
        b._con = con
        b._handle = handle
        b._length = length
        b._offset = 0
        return b

    def _check(self):
        self._con._check()
        if self._handle is None:
            raise ProgrammingError("Cannot operate on a closed blob.")

    def _read(self, n, offset):
        return self._io(self._con._native.blob_read, offset, n)

    def _write(self, offset, data):
        self._io(self._con._native.blob_write, offset, data)

    def _io(self, f, *args):
        try:
            return f(self._handle, *args)
        except OperationalError as e:
            # SQLITE_ABORT: the row changed, and SQLite let go of the
            # blob, whose length then reads 0 (sqlite3_blob_bytes).
            if getattr(e, "sqlite_errorcode", None) == 4:
                self._length = 0
            raise

    def close(self):
        self._con._check()
        self._close()

    def _close(self):
        handle, self._handle = self._handle, None
        if handle is not None:
            self._con._native.blob_close(handle)

    def __del__(self):
        try:
            self._close()
        except Exception:  # noqa: BLE001 (the connection is gone, or busy)
            pass

    def __enter__(self):
        self._check()
        return self

    def __exit__(self, type, val, tb):  # noqa: A002 (sqlite3's names)
        self._check()
        self._close()
        return False

    def __len__(self):
        self._check()
        return self._length

    def tell(self):
        self._check()
        return self._offset

    def seek(self, offset, origin=0, /):
        self._check()
        offset, origin = _c_int(offset), _c_int(origin)
        if origin == 1:
            if offset > _INT_MAX - self._offset:
                raise OverflowError("seek offset results in overflow")
            offset += self._offset
        elif origin == 2:
            if offset > _INT_MAX - self._length:
                raise OverflowError("seek offset results in overflow")
            offset += self._length
        elif origin != 0:
            raise ValueError("'origin' should be os.SEEK_SET, os.SEEK_CUR, or os.SEEK_END")
        if offset < 0 or offset > self._length:
            raise ValueError("offset out of blob range")
        self._offset = offset

    def read(self, length=-1, /):
        self._check()
        length = _c_int(length)
        if length < 0:
            length = self._length
        length = min(length, self._length - self._offset)
        data = self._read(length, self._offset)
        self._offset += length
        return data

    def write(self, data, /):
        self._check()
        data = _bytes_of(data)
        if len(data) > self._length - self._offset:
            raise ValueError("data longer than blob length")
        self._write(self._offset, data)
        self._offset += len(data)

    def _index(self, item):
        """``item`` as an index into the blob; ``None`` if it is no index."""
        if not _is_index(item):
            return None
        i = operator.index(item)
        if not -2**63 <= i < 2**63:
            raise IndexError(f"cannot fit '{type(item).__name__}' into an index-sized integer")
        if i < 0:
            i += self._length
        if i < 0 or i >= self._length:
            raise IndexError("Blob index out of range")
        return i

    def __getitem__(self, item):
        self._check()
        i = self._index(item)
        if i is not None:
            return self._read(1, i)[0]
        if isinstance(item, slice):
            span = range(*item.indices(self._length))
            if not span:
                return b""
            if span.step == 1:
                return self._read(len(span), span.start)
            lo = min(span[0], span[-1])
            data = self._read(max(span[0], span[-1]) + 1 - lo, lo)
            return bytes(data[i - lo] for i in span)
        raise TypeError("Blob indices must be integers")

    def __setitem__(self, item, value):
        self._check()
        if _is_index(item):
            # As sqlite3: the value must be an int before the index is
            # checked, and in range after.
            byte = operator.index(value)
            i = self._index(item)
            if not 0 <= byte <= 255:
                raise ValueError("byte must be in range(0, 256)")
            self._write(i, bytes((byte,)))
            return
        if isinstance(item, slice):
            span = range(*item.indices(self._length))
            data = _bytes_of(value)
            if len(data) != len(span):
                raise IndexError("Blob slice assignment is wrong size")
            if not span:
                return
            if span.step == 1:
                self._write(span.start, data)
                return
            lo = min(span[0], span[-1])
            buf = bytearray(self._read(max(span[0], span[-1]) + 1 - lo, lo))
            for i, b in zip(span, data):
                buf[i - lo] = b
            self._write(lo, bytes(buf))
            return
        raise TypeError("Blob indices must be integers")

    def __delitem__(self, item):
        self._check()
        if isinstance(item, slice):
            raise TypeError("Blob doesn't support slice deletion")
        raise TypeError("Blob doesn't support item deletion")


def _is_index(v):
    return hasattr(type(v), "__index__")


def _c_int(v):
    """``v`` as a C int, as an argument of sqlite3's is taken."""
    v = operator.index(v)
    if not -2**31 <= v <= _INT_MAX:
        raise OverflowError("Python int too large to convert to C int")
    return v


def _bytes_of(data):
    """The bytes of a bytes-like object, as a ``Py_buffer`` argument takes them."""
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"a bytes-like object is required, not '{type(data).__name__}'") from None
    if not view.c_contiguous:
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return view.tobytes()


def _too_large(sql, limit):
    """Whether ``sql``'s UTF-8 is longer than ``limit`` bytes."""
    n = len(sql)
    return n > limit or (4 * n > limit and len(sql.encode()) > limit)


def connect(database, timeout=5.0, detect_types=0, isolation_level="",
            check_same_thread=True, factory=None, cached_statements=128,
            uri=False, *, autocommit=LEGACY_TRANSACTION_CONTROL):
    """Open a connection, as ``sqlite3.connect`` does."""
    factory = Connection if factory is None else factory
    return factory(database, timeout=timeout, detect_types=detect_types,
                   isolation_level=isolation_level,
                   check_same_thread=check_same_thread,
                   cached_statements=cached_statements, uri=uri,
                   autocommit=autocommit)


class Connection:
    """A connection to a SQLite database, with Pleroma's planes."""

    Error = Error
    Warning = Warning
    InterfaceError = InterfaceError
    DatabaseError = DatabaseError
    DataError = DataError
    OperationalError = OperationalError
    IntegrityError = IntegrityError
    InternalError = InternalError
    ProgrammingError = ProgrammingError
    NotSupportedError = NotSupportedError

    # What a connection whose __init__ did not run (or failed) holds.
    _native = None
    row_factory = None
    _closed = True
    _check_same_thread = False
    # The program's SQLITE_LIMIT_SQL_LENGTH when it set one (see setlimit).
    _sql_max = None
    # Whether the program's statements are screened (user.rs): an
    # authorizer or a limit SQLite checks while preparing is set.
    _screens = False

    def __init__(self, database, timeout=5.0, detect_types=0,
                 isolation_level="", check_same_thread=True, factory=None,
                 cached_statements=128, uri=False, *,
                 autocommit=LEGACY_TRANSACTION_CONTROL):
        import os

        if isinstance(database, bytes):
            database = os.fsdecode(database)
        elif not isinstance(database, str):
            database = os.fspath(database)
            if isinstance(database, bytes):
                database = os.fsdecode(database)
        self._native = None
        self._closed = True
        self._isolation_level = None
        self._autocommit = LEGACY_TRANSACTION_CONTROL
        self._check_autocommit(autocommit)
        if not isinstance(timeout, (int, float)):
            raise TypeError(f"must be real number, not {type(timeout).__name__}")
        if not isinstance(detect_types, int):
            raise TypeError(f"'{type(detect_types).__name__}' object cannot be interpreted as an integer")
        self._native = _native.Native(database, float(timeout), bool(uri))
        self._closed = False
        self._thread = threading.get_ident()
        self._check_same_thread = check_same_thread
        self.detect_types = detect_types
        self.row_factory = None
        self.text_factory = str
        self._trace = None
        self._info = {}
        # Python rows of answers the memo hands out again (the same rows,
        # by identity): key -> (the result holding them alive, the rows).
        self._rows = {}
        self.isolation_level = isolation_level
        self._autocommit = autocommit
        if autocommit is False:
            self._native.run("BEGIN", ())

    @staticmethod
    def _check_autocommit(value):
        if value is not LEGACY_TRANSACTION_CONTROL and not isinstance(value, bool) \
                and value != LEGACY_TRANSACTION_CONTROL:
            raise ValueError(
                "autocommit must be True, False, or sqlite3.LEGACY_TRANSACTION_CONTROL")

    def _check(self):
        if self._closed:
            if self._native is None:
                raise ProgrammingError("Base Connection.__init__ not called.")
            raise ProgrammingError("Cannot operate on a closed database.")
        if self._check_same_thread and threading.get_ident() != self._thread:
            raise ProgrammingError(
                "SQLite objects created in a thread can only be used in that same thread. "
                f"The object was created in thread id {self._thread} and this is "
                f"thread id {threading.get_ident()}.")

    # -- transactions ---------------------------------------------------

    @property
    def isolation_level(self):
        if self._closed:
            self._check()
        return self._isolation_level

    @isolation_level.setter
    def isolation_level(self, value):
        if value is None:
            if self._native is not None and not self._native.is_closed() \
                    and self._autocommit == LEGACY_TRANSACTION_CONTROL:
                self.commit()
            self._isolation_level = None
            return
        if not isinstance(value, str):
            raise TypeError("isolation_level must be str or None")
        level = str.upper(value)  # never a subclass's own upper()
        if level not in _LEVELS:
            raise ValueError(
                "isolation_level string must be '', 'DEFERRED', 'IMMEDIATE', or 'EXCLUSIVE'")
        self._isolation_level = level

    @property
    def autocommit(self):
        return self._autocommit

    @autocommit.setter
    def autocommit(self, value):
        self._check_autocommit(value)
        self._check()
        old = self._autocommit
        self._autocommit = value
        if value is True and old is False and self.in_transaction:
            self._native.run("COMMIT", ())
        elif value is False and not self.in_transaction:
            self._native.run("BEGIN", ())

    @property
    def in_transaction(self):
        self._check()
        return self._native.in_transaction()

    @property
    def total_changes(self):
        self._check()
        return self._native.total_changes()

    @property
    def last_route(self):
        """The route of the last statement: ``plane``, ``memo``, ``limb``,
        ``residue`` or ``engine``."""
        self._check()
        return self._native.last_route()

    @property
    def last_route_reason(self):
        """Why the last statement took its route."""
        self._check()
        return self._native.last_route_reason()

    def _begin(self):
        """The BEGIN an implicit transaction opens with, or None."""
        if self._autocommit == LEGACY_TRANSACTION_CONTROL:
            level = self._isolation_level
            if level is None:
                return None
            return "BEGIN " + level
        return None

    def commit(self):
        self._check()
        if self._autocommit is True:
            return
        self._end("COMMIT")
        if self._autocommit is False:
            self._native.run("BEGIN", (), None, None, self._trace)

    def rollback(self):
        self._check()
        if self._autocommit is True:
            return
        self._end("ROLLBACK")
        if self._autocommit is False:
            self._native.run("BEGIN", (), None, None, self._trace)

    def close(self):
        if self._native is None:
            raise ProgrammingError("Base Connection.__init__ not called.")
        if self._check_same_thread and threading.get_ident() != self._thread:
            self._check()
        self._closed = True
        self._native.close()

    def __enter__(self):
        self._check()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.rollback()
                raise
        else:
            self.rollback()
        return False

    def __del__(self):
        native = getattr(self, "_native", None)
        if native is not None:
            native.close()

    # -- statements -----------------------------------------------------

    def cursor(self, factory=_UNSET):
        self._check()
        cur = (Cursor if factory is _UNSET else factory)(self)
        if not issubclass(type(cur), Cursor):
            raise TypeError("factory must return a cursor, not " + type(cur).__name__)
        if self.row_factory is not None and cur.row_factory is None:
            cur.row_factory = self.row_factory
        return cur

    def execute(self, sql, parameters=(), /):
        if self.row_factory is None:
            # The common case without cursor()'s checks (execute repeats them).
            return Cursor(self).execute(sql, parameters)
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql, parameters, /):
        return self.cursor().executemany(sql, parameters)

    def executescript(self, sql_script, /):
        return self.cursor().executescript(sql_script)

    def create_function(self, name, narg, func, *, deterministic=False):
        self._check()
        self._native.create_function(name, narg, func, deterministic)

    def create_aggregate(self, name, n_arg, aggregate_class):
        """An aggregate SQL function: per group an instance of
        ``aggregate_class``, ``step(*args)`` per row, ``finalize()``."""
        self._check()
        self._native.create_aggregate(name, n_arg, aggregate_class)

    def create_window_function(self, name, num_params, aggregate_class, /):
        """An aggregate window function: ``aggregate_class`` has ``step``,
        ``value``, ``inverse`` and ``finalize``; ``None`` removes it."""
        self._check()
        self._native.create_window_function(name, num_params, aggregate_class)

    def create_collation(self, name, callable):  # noqa: A002 (sqlite3's name)
        """A collation comparing two strings with ``callable(a, b)``;
        ``None`` removes it."""
        self._check()
        if callable is not None and not builtins_callable(callable):
            raise TypeError("parameter must be callable")
        self._native.create_collation(name, callable)

    def set_trace_callback(self, trace_callback):
        """Call ``trace_callback(sql)`` with each statement this connection
        runs for the program (its parameters expanded), as ``sqlite3``
        does; ``None`` stops it. Pleroma's own statements (state rows, the
        wrap of an autocommit write) are not traced: they are not the
        program's."""
        self._check()
        self._trace = trace_callback

    def _end(self, verb):
        if self._native.end(verb) and self._trace is not None:
            _call_trace(self._trace, verb)

    def __call__(self, *args):
        """``sql`` prepared, as a ``Statement`` (``sqlite3``'s call)."""
        self._check()
        if len(args) != 1:
            raise TypeError(f"function takes exactly 1 argument ({len(args)} given)")
        sql = args[0]
        if not isinstance(sql, str):
            raise TypeError(f"argument 1 must be str, not {type(sql).__name__}")
        info = self._statement(sql)
        if self._screens and info.names is not None:
            self._native.screen(info.text or sql)
        return object.__new__(Statement)

    def set_authorizer(self, authorizer_callback):
        """Ask ``authorizer_callback(action, arg1, arg2, dbname, source)``
        about each statement of the program as SQLite prepares it
        (``SQLITE_OK``, ``SQLITE_DENY``); ``None`` removes it. Pleroma's own
        statements are not the program's and are not asked about; an
        answer of ``SQLITE_IGNORE`` raises ``NotSupportedError``."""
        self._check()
        self._native.set_authorizer(authorizer_callback)
        self._screens = self._native.screens()

    def set_progress_handler(self, progress_handler, n):
        """Call ``progress_handler()`` every ``n`` SQLite instructions; a
        true answer (or an exception) interrupts the statement. While it is
        set every statement runs on SQLite, so that it is called."""
        self._check()
        self._native.set_progress_handler(progress_handler, n)

    def getlimit(self, category, /):
        """The connection's limit of ``category`` (``SQLITE_LIMIT_…``)."""
        self._check()
        return self._native.getlimit(category)

    def setlimit(self, category, limit, /):
        """Set the limit of ``category`` (a negative ``limit`` leaves it);
        returns the limit before."""
        self._check()
        before = self._native.setlimit(category, limit)
        if category == SQLITE_LIMIT_SQL_LENGTH:  # noqa: F405 (from _constants)
            # Checked by _statement, on the texts it has not read since.
            self._sql_max = self._native.getlimit(category)
            self._info.clear()
        self._screens = self._native.screens()
        return before

    def blobopen(self, table, column, row, /, *, readonly=False, name="main"):
        """Open the BLOB in ``table``.``column`` of row ``row`` as a
        :class:`Blob`. Writing is refused on a table with a plane (the
        write would pass by the change hook; docs/python.md)."""
        self._check()
        for i, arg in ((1, table), (2, column)):
            if not isinstance(arg, str):
                raise TypeError(f"blobopen() argument {i} must be str, not {type(arg).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"blobopen() argument 'name' must be str, not {type(name).__name__}")
        if not isinstance(row, int):
            raise TypeError("expected 'int'")
        if not -2**63 <= row < 2**63:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        handle, length = self._native.blob_open(table, column, row, bool(readonly), name)
        return Blob._open(self, handle, length)

    def serialize(self, *, name="main"):
        """Database ``name`` as the bytes of its file."""
        self._check()
        return self._native.serialize(name)

    def deserialize(self, data, /, *, name="main"):
        """Replace database ``name`` with ``data`` (the bytes of a database
        file); the planes are opened again from it. Only on a connection to
        an in-memory database."""
        self._check()
        if isinstance(data, str):  # as sqlite3 takes it: its UTF-8
            data = data.encode()
        self._native.deserialize(_bytes_of(data), name)

    def backup(self, target, *, pages=-1, progress=None, name="main", sleep=0.250):
        """Copy database ``name`` into ``target`` (another
        :class:`Connection`), as ``sqlite3``'s ``backup``; ``target`` then
        opens its planes again from what it holds."""
        self._check()
        if not isinstance(target, Connection):
            raise TypeError(
                f"backup() argument 1 must be pleroma.Connection, not {type(target).__name__}")
        if target is self:
            raise ValueError("target cannot be the same connection instance")
        target._check()
        if progress is not None and not builtins_callable(progress):
            raise TypeError("progress argument must be a callable")
        if not isinstance(name, str):
            raise TypeError(f"backup() argument 'name' must be str, not {type(name).__name__}")
        self._native.backup(target._native, pages if pages != 0 else -1, name, progress,
                            float(sleep))

    def iterdump(self):
        """The database as SQL text, statement by statement, in the order
        and form of ``sqlite3``'s ``iterdump``. Pleroma's persisted state
        (``pleroma_state``) and its guard indexes are left out; its catalog
        stays, so a Pleroma connection opening the copy brings the planes
        back (plain ``sqlite3`` replays it too)."""
        self._check()
        return _dump(self)

    def interrupt(self):
        """Make the statement running on this connection in another thread
        fail with ``OperationalError('interrupted')``."""
        if self._closed:
            raise ProgrammingError("Cannot operate on a closed database.")
        self._native.interrupt()

    def __getattr__(self, name):
        if name in _NOT_SUPPORTED:
            raise NotSupportedError(
                f"pleroma: Connection.{name} is not supported (docs/python.md lists "
                "what differs from sqlite3)")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _statement(self, sql):
        """What the text says: its parameters' names, whether it is DML,
        its columns' declared types. Raises SQLite's error when it does
        not prepare, and ProgrammingError for more than one statement."""
        info = self._info.get(sql)
        if info is not None:
            return info
        if not isinstance(sql, str):
            raise TypeError(f"execute() argument 1 must be str, not {type(sql).__name__}")
        if self._sql_max is not None and _too_large(sql, self._sql_max):
            raise DataError("query string is too large")
        if "\x00" in sql:
            raise ProgrammingError("the query contains a null character")
        parts = _native.Native.split(sql)
        if not parts:
            info = _Info((), False, ())
            info.blank = True
        else:
            try:
                names, decltypes, readonly = self._native.parameters(parts[0])
            except OperationalError:
                # It does not prepare on SQLite alone: one of Pleroma's
                # PRAGMAs (which take several arguments) runs anyway, and
                # the router says what is wrong with it. Anything else
                # raises here, before an implicit BEGIN, as in sqlite3
                # (found from outside: a prepare that met a lock left a
                # transaction open). Nothing is cached.
                if not parts[0].lstrip().upper().startswith("PRAGMA"):
                    raise
                if len(parts) > 1:
                    raise ProgrammingError("You can only execute one statement at a time.")
                return _Info(None, _is_dml(sql), ())
            if len(parts) > 1:
                raise ProgrammingError("You can only execute one statement at a time.")
            info = _Info(tuple(names), _is_dml(sql), tuple(decltypes), readonly)
            # The statement alone, without a tail of blanks and comments
            # (which SQLite skips, and the router would read as a statement).
            info.text = parts[0]
        if len(self._info) >= _INFO_CAPACITY:
            self._info.clear()
        self._info[sql] = info
        return info


def _bind(info, parameters):
    """The parameter values in SQLite's numbering, checked as ``sqlite3`` checks them."""
    names = info.names
    if type(parameters) is tuple and len(parameters) == len(names or ()):
        return parameters
    if names is None:
        # Not prepared by SQLite alone: the connection checks what it needs.
        if isinstance(parameters, dict):
            return []
        return parameters
    if type(parameters) is tuple or type(parameters) is list:
        seq = parameters
    elif isinstance(parameters, dict):
        out = []
        for i, name in enumerate(names, 1):
            if name is None:
                raise ProgrammingError(
                    f"Binding {i} has no name, but you supplied a dictionary "
                    "(which has only names).")
            key = name[1:]
            try:
                out.append(parameters[key])
            except KeyError:
                raise ProgrammingError(
                    f"You did not supply a value for binding parameter :{key}.") from None
        return out
    elif hasattr(parameters, "__len__") and hasattr(parameters, "__getitem__"):
        seq = [parameters[i] for i in range(len(parameters))]
    else:
        raise ProgrammingError("parameters are of unsupported type")
    if len(seq) != len(names):
        raise ProgrammingError(
            "Incorrect number of bindings supplied. The current statement uses "
            f"{len(names)}, and there are {len(seq)} supplied.")
    return seq


# The cursors (by id: a subclass may be unhashable) running the program's
# code (the parameters' iterator of executemany, converters, row
# factories): using one from there is refused, as in sqlite3 ("Recursive
# use of cursors not allowed.").
_busy = set()


class Cursor:
    """A DB-API cursor over a :class:`Connection`."""

    __slots__ = ("connection", "_arraysize", "row_factory", "description", "rowcount",
                 "lastrowid", "_result", "_converters", "_closed", "__weakref__", "__dict__")
    def __init__(self, connection):
        if _busy and id(self) in _busy:
            raise ProgrammingError("Recursive use of cursors not allowed.")
        if not isinstance(connection, Connection):
            raise TypeError("Cursor() argument 1 must be pleroma.Connection")
        self.connection = connection
        self._arraysize = 1
        self.row_factory = None
        self.description = None
        self.rowcount = -1
        self.lastrowid = None
        self._result = None
        self._converters = None
        self._closed = False

    @property
    def arraysize(self):
        return self._arraysize

    @arraysize.setter
    def arraysize(self, value):
        if not isinstance(value, int):
            raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer")
        self._arraysize = value

    def _check(self):
        try:
            closed = self._closed
        except AttributeError:
            raise ProgrammingError("Base Cursor.__init__ not called.") from None
        if id(self) in _busy:
            raise ProgrammingError("Recursive use of cursors not allowed.")
        if closed:
            raise ProgrammingError("Cannot operate on a closed cursor.")
        self.connection._check()

    def close(self):
        if id(self) in _busy:
            raise ProgrammingError("Recursive use of cursors not allowed.")
        try:
            self._closed
        except AttributeError:
            raise ProgrammingError("Base Cursor.__init__ not called.") from None
        if self.connection._native is not None:
            self.connection._check()
        self._result = None
        self._closed = True

    def setinputsizes(self, sizes, /):
        pass

    def setoutputsize(self, size, column=None, /):
        pass

    def execute(self, sql, parameters=(), /):
        try:
            closed = self._closed
        except AttributeError:
            closed = True
        if closed or _busy:
            self._check()
        con = self.connection
        con._check()
        info = con._info.get(sql) or con._statement(sql)
        self._result = None
        self.description = None
        if info.blank:
            self.rowcount = -1
            return self
        values = _bind(info, parameters)
        if _base_adapted:
            values = _adapt_all(values)
            adapt_one = None
        else:
            adapt_one = _adapt
        begin = con._begin() if info.is_dml else None
        try:
            columns, result, changes, rowid = con._native.run(
                info.text or sql, values, begin, adapt_one, con._trace,
                sql if con._trace is not None else None, info.names is not None)
        except BaseException:
            self.rowcount = -1
            raise
        self._result = result
        self.rowcount = changes if info.is_dml else -1
        self.lastrowid = rowid
        if columns is not None:
            if columns == info.columns and not con.detect_types:
                self.description = info.description
                self._converters = None
            else:
                self._describe(columns, info)
        return self

    def _describe(self, columns, info):
        con = self.connection
        detect = con.detect_types
        self._converters = None
        named = columns
        if detect and converters:
            convs = []
            names = []
            for i, name in enumerate(columns):
                conv = None
                if detect & PARSE_COLNAMES:
                    lb = name.find("[")
                    rb = name.find("]", lb + 1)
                    if lb >= 0 and rb > lb:
                        conv = converters.get(name[lb + 1:rb].upper())
                    if lb >= 0:
                        name = name[:lb].rstrip(" ") if name[:lb].endswith(" ") else name[:lb]
                if conv is None and detect & PARSE_DECLTYPES and i < len(info.decltypes):
                    decl = info.decltypes[i]
                    if decl:
                        conv = converters.get(decl.split("(")[0].split(" ")[0].upper())
                convs.append(conv)
                names.append(name)
            named = names
            if any(c is not None for c in convs):
                self._converters = convs
        elif detect & PARSE_COLNAMES:
            named = [n[:n.find("[")].rstrip(" ") if "[" in n else n for n in columns]
        self.description = tuple((n, None, None, None, None, None, None) for n in named)
        if not detect:
            info.columns = columns
            info.description = self.description

    def executemany(self, sql, seq_of_parameters, /):
        self._check()
        con = self.connection
        info = con._statement(sql)
        if info.readonly and not info.blank:
            raise ProgrammingError("executemany() can only execute DML statements.")
        self._result = None
        self.description = None
        self.rowcount = 0
        native = con._native
        # As sqlite3: the statement is prepared (and authorized) once, before
        # the implicit BEGIN.
        screen = info.names is not None
        if screen and con._screens:
            native.screen(info.text or sql)
        begin = con._begin() if info.is_dml else None
        if begin is not None and not native.in_transaction():
            if con._trace is not None:
                _call_trace(con._trace, begin)
            native.run(begin, ())
        if info.blank:
            return self
        # All or nothing: a failed row leaves the database as it was
        # before the call (docs/python.md). The savepoint is Pleroma's
        # own: not screened by the program's authorizer.
        params = iter(seq_of_parameters)
        first = True
        opened = False  # the savepoint began the transaction
        total = 0
        adapt_one = None if _base_adapted else _adapt
        _busy.add(id(self))
        try:
            for p in params:
                values = _bind(info, p)
                if _base_adapted:
                    values = _adapt_all(values)
                if first:
                    opened = not native.in_transaction()
                    native.run("SAVEPOINT pleroma_executemany", (), screen=False)
                    first = False
                _, _, changes, _ = native.run(info.text or sql, values, None, adapt_one,
                                              con._trace, None, False)
                total += changes
            if not first:
                native.run("RELEASE pleroma_executemany", (), screen=False)
        except BaseException:
            self.rowcount = -1
            if not first:
                # Nothing of the call stays, and a transaction the savepoint
                # began ends with it (found from outside: a RELEASE that met
                # a lock left it open, and later writes were lost with it).
                try:
                    if opened:
                        native.end("ROLLBACK", False)
                    else:
                        native.run("ROLLBACK TO pleroma_executemany", (), screen=False)
                        native.run("RELEASE pleroma_executemany", (), screen=False)
                except Error:
                    pass
            raise
        finally:
            _busy.discard(id(self))
        self.rowcount = total if info.is_dml else -1
        return self

    def executescript(self, sql_script, /):
        self._check()
        if not isinstance(sql_script, str):
            raise TypeError(
                f"executescript() argument must be str, not {type(sql_script).__name__}")
        con = self.connection
        if con._sql_max is not None and _too_large(sql_script, con._sql_max):
            raise DataError("query string is too large")
        if "\x00" in sql_script:
            raise ValueError("embedded null character")
        if con._autocommit is not True:
            con._end("COMMIT")
        self._result = None
        self.description = None
        if con._trace is None and not con._screens:
            con._native.script(sql_script)
        else:
            # One statement at a time, each traced (and screened) as it runs.
            for raw, part in _native.Native.split_traced(sql_script):
                if con._trace is not None:
                    _call_trace(con._trace, raw)
                screen = con._statement(part).names is not None
                con._native.run(part, (), screen=screen)
        return self

    def _text(self):
        tf = self.connection.text_factory
        return None if tf is str else tf

    def _plain(self):
        return self._converters is None and self.row_factory is None

    def _finish(self, rows):
        # Converters and row factories are the program's: the cursor is
        # locked while they run, as in sqlite3.
        _busy.add(id(self))
        try:
            convs = self._converters
            if convs is not None:
                rows = [tuple(_convert(c, v) for c, v in zip(convs, t)) for t in rows]
            f = self.row_factory
            if f is not None:
                rows = [f(self, t) for t in rows]
            return rows
        finally:
            _busy.discard(id(self))

    def fetchone(self):
        self._check()
        if self._result is None:
            return None
        t = self._result.fetchone(self._text())
        if t is None:
            return None
        if self._converters is None and self.row_factory is None:
            return t
        return self._finish([t])[0]

    def fetchmany(self, size=None):
        self._check()
        if size is None:
            size = self._arraysize
        if self._result is None:
            return []
        # As sqlite3: a size of 0 or less fetches every row left.
        rows = self._result.fetch(size if size > 0 else None, self._text())
        if self._converters is None and self.row_factory is None:
            return rows
        return self._finish(rows)

    def fetchall(self):
        try:
            con = self.connection
            bad = self._closed or con._closed or _busy
        except AttributeError:
            bad = True
        if bad:
            self._check()
        result = self._result
        if result is None:
            return []
        tf = con.text_factory
        if tf is str and result.untouched():
            # A memo answer comes back as the same rows: convert them once.
            key = result.key()
            held = con._rows.get(key)
            if held is not None:
                result.skip_all()
                rows = list(held[1])
            else:
                rows = result.fetch(None, None)
                if len(con._rows) >= _ROWS_CAPACITY:
                    con._rows.clear()
                con._rows[key] = (result, tuple(rows))
        else:
            rows = result.fetch(None, None if tf is str else tf)
        if self._converters is None and self.row_factory is None:
            return rows
        return self._finish(rows)

    def __iter__(self):
        return self

    def __next__(self):
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def fetch_arrow_table(self):
        """The rows not fetched yet, as a ``pyarrow.Table``, handed over
        through the Arrow C data interface (no row-by-row copy)."""
        self._check()
        pa = _require("pyarrow", "fetch_arrow_table()")
        if self._result is None:
            return pa.table({})
        batch = pa.record_batch(self._result)
        return pa.Table.from_batches([batch])

    def df(self):
        """The rows not fetched yet, as a pandas ``DataFrame`` (through Arrow)."""
        _require("pandas", "df()")
        return self.fetch_arrow_table().to_pandas()


def _quoted(name):
    return '"' + name.replace('"', '""') + '"'


def _rows_of(con, sql, params=()):
    cur = Cursor(con)  # no row factory: the dump reads tuples
    return cur.execute(sql, params).fetchall()


def _dump(con):
    yield "BEGIN TRANSACTION;"
    writable_schema = False
    sequence = False
    tables = _rows_of(
        con,
        "SELECT name, type, sql FROM sqlite_master WHERE sql NOT NULL AND type = 'table' "
        "AND name <> 'pleroma_state' ORDER BY name")
    for name, _, sql in tables:
        if name == "sqlite_sequence":
            sequence = True
            continue
        if name == "sqlite_stat1":
            yield 'ANALYZE "sqlite_master";'
            continue
        if name.startswith("sqlite_"):
            continue
        if sql.startswith("CREATE VIRTUAL TABLE"):
            if not writable_schema:
                writable_schema = True
                yield "PRAGMA writable_schema=ON;"
            q = lambda t: t.replace("'", "''")  # noqa: E731
            yield ("INSERT INTO sqlite_master(type,name,tbl_name,rootpage,sql)"
                   f"VALUES('table','{q(name)}','{q(name)}',0,'{q(sql)}');")
            continue
        yield f"{sql};"
        yield from _dump_rows(con, name)
    others = _rows_of(
        con,
        "SELECT name, type, sql FROM sqlite_master WHERE sql NOT NULL "
        "AND type IN ('index', 'trigger', 'view') "
        "AND NOT (type = 'index' AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\')")
    for _, _, sql in others:
        yield f"{sql};"
    if sequence:
        yield 'DELETE FROM "sqlite_sequence";'
        yield from _dump_rows(con, "sqlite_sequence")
    if writable_schema:
        yield "PRAGMA writable_schema=OFF;"
    yield "COMMIT;"


def _dump_rows(con, table):
    columns = [r[1] for r in _rows_of(con, f"PRAGMA table_info({_quoted(table)})")]
    if not columns:
        return
    values = "||','||".join(f"quote({_quoted(c)})" for c in columns)
    head = f"INSERT INTO {_quoted(table)} VALUES("
    for (line,) in _rows_of(con, f"SELECT ?||{values}||');' FROM {_quoted(table)}", (head,)):
        yield line


def _call_trace(trace, sql):
    try:
        trace(sql)
    except Exception as e:  # noqa: BLE001 (sqlite3 ignores it too)
        if _callback_tracebacks:
            _native.unraisable(e, trace)


def _convert(conv, v):
    if conv is None or v is None:
        return v
    if v == b"" or v == "":
        # sqlite3 hands a converter sqlite3_column_blob(), NULL when empty.
        return None
    if isinstance(v, bytes):
        return conv(v)
    if isinstance(v, str):
        return conv(v.encode())
    return conv(str(v).encode())


def _require(module, what):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{what} needs {module}: install it with `pip install {module}`"
            + (" pyarrow" if module == "pandas" else "")) from None
