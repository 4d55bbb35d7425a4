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
    "connect", "Connection", "Cursor", "Row", "PrepareProtocol",
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
# The sqlite3 module's connection methods this package does not have yet
# (docs/python.md): asking for one raises NotSupportedError, not a
# bare AttributeError.
_NOT_SUPPORTED = frozenset((
    "set_authorizer", "set_progress_handler",
    "enable_load_extension", "load_extension",
    "blobopen", "serialize", "deserialize", "getlimit", "setlimit",
    "getconfig", "setconfig",
))
_INFO_CAPACITY = 1024
_ROWS_CAPACITY = 64


class PrepareProtocol:
    """The protocol object adapters are registered for (as in ``sqlite3``)."""


adapters = {}
converters = {}


def register_adapter(type_, adapter):
    """Bind values of ``type_`` through ``adapter(value)``."""
    adapters[(type_, PrepareProtocol)] = adapter


def register_converter(typename, converter):
    """Convert columns declared (or named) ``typename`` with ``converter(bytes)``."""
    converters[typename.upper()] = converter


def adapt(obj, proto=PrepareProtocol, alt=None, /):
    """``obj`` adapted for SQLite as the binding would adapt it."""
    adapter = adapters.get((type(obj), proto))
    if adapter is not None:
        return adapter(obj)
    conform = getattr(obj, "__conform__", None)
    if conform is not None:
        out = conform(proto)
        if out is not None:
            return out
    if alt is not None:
        return alt
    raise ProgrammingError("can't adapt")


_callback_tracebacks = False


def enable_callback_tracebacks(flag, /):
    """Print the tracebacks of exceptions in user functions (as ``sqlite3``)."""
    global _callback_tracebacks
    _callback_tracebacks = bool(flag)


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
    adapter = adapters.get((type(value), PrepareProtocol))
    if adapter is not None:
        return adapter(value)
    conform = getattr(value, "__conform__", None)
    if conform is not None:
        out = conform(PrepareProtocol)
        if out is not None:
            return out
    if isinstance(value, _BINDABLE):
        return value
    raise ProgrammingError(
        f"Error binding parameter {index}: type '{_type_name(type(value))}' is not supported")


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
        if not isinstance(cursor, Cursor):
            raise TypeError("Row() argument 1 must be pleroma.Cursor")
        if not isinstance(values, tuple):
            raise TypeError("Row() argument 2 must be tuple")
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
            folded = key.upper()
            for i, k in enumerate(self._keys):
                if k.upper() == folded:
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
            raise ProgrammingError("Cannot operate on a closed database.")
        if self._check_same_thread and threading.get_ident() != self._thread:
            raise ProgrammingError(
                "SQLite objects created in a thread can only be used in that same thread. "
                f"The object was created in thread id {self._thread} and this is "
                f"thread id {threading.get_ident()}.")

    # -- transactions ---------------------------------------------------

    @property
    def isolation_level(self):
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
            return
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

    def cursor(self, factory=None):
        self._check()
        cur = (Cursor if factory is None else factory)(self)
        if not isinstance(cur, Cursor):
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


class Cursor:
    """A DB-API cursor over a :class:`Connection`."""

    __slots__ = ("connection", "_arraysize", "row_factory", "description", "rowcount",
                 "lastrowid", "_result", "_converters", "_closed", "__weakref__", "__dict__")

    def __init__(self, connection):
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
        if self._closed:
            raise ProgrammingError("Cannot operate on a closed cursor.")
        self.connection._check()

    def close(self):
        if self.connection._native is not None:
            self.connection._check()
        self._result = None
        self._closed = True

    def setinputsizes(self, sizes, /):
        pass

    def setoutputsize(self, size, column=None, /):
        pass

    def execute(self, sql, parameters=(), /):
        if self._closed:
            raise ProgrammingError("Cannot operate on a closed cursor.")
        con = self.connection
        con._check()
        info = con._info.get(sql) or con._statement(sql)
        self._result = None
        self.description = None
        if info.blank:
            self.rowcount = -1
            return self
        values = _bind(info, parameters)
        begin = con._begin() if info.is_dml else None
        try:
            columns, result, changes, rowid = con._native.run(
                info.text or sql, values, begin, _adapt, con._trace,
                sql if con._trace is not None else None)
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
        begin = con._begin() if info.is_dml else None
        if begin is not None and not native.in_transaction():
            if con._trace is not None:
                _call_trace(con._trace, begin)
            native.run(begin, ())
        if info.blank:
            return self
        # All or nothing: a failed row leaves the database as it was
        # before the call (docs/python.md).
        params = iter(seq_of_parameters)
        first = True
        opened = False  # the savepoint began the transaction
        total = 0
        try:
            for p in params:
                values = _bind(info, p)
                if first:
                    opened = not native.in_transaction()
                    native.run("SAVEPOINT pleroma_executemany", ())
                    first = False
                _, _, changes, _ = native.run(info.text or sql, values, None, _adapt, con._trace)
                total += changes
            if not first:
                native.run("RELEASE pleroma_executemany", ())
        except BaseException:
            self.rowcount = -1
            if not first:
                # Nothing of the call stays, and a transaction the savepoint
                # began ends with it (found from outside: a RELEASE that met
                # a lock left it open, and later writes were lost with it).
                try:
                    if opened:
                        native.end("ROLLBACK")
                    else:
                        native.run("ROLLBACK TO pleroma_executemany", ())
                        native.run("RELEASE pleroma_executemany", ())
                except Error:
                    pass
            raise
        self.rowcount = total if info.is_dml else -1
        return self

    def executescript(self, sql_script, /):
        self._check()
        if not isinstance(sql_script, str):
            raise TypeError(
                f"executescript() argument must be str, not {type(sql_script).__name__}")
        if "\x00" in sql_script:
            raise ValueError("embedded null character")
        con = self.connection
        if con._autocommit is not True:
            con._end("COMMIT")
        self._result = None
        self.description = None
        if con._trace is None:
            con._native.script(sql_script)
        else:
            # One statement at a time, each traced as it runs.
            for raw, part in _native.Native.split_traced(sql_script):
                _call_trace(con._trace, raw)
                con._native.run(part, ())
        return self

    def _text(self):
        tf = self.connection.text_factory
        return None if tf is str else tf

    def _plain(self):
        return self._converters is None and self.row_factory is None

    def _finish(self, rows):
        convs = self._converters
        if convs is not None:
            rows = [tuple(_convert(c, v) for c, v in zip(convs, t)) for t in rows]
        f = self.row_factory
        if f is not None:
            rows = [f(self, t) for t in rows]
        return rows

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
        con = self.connection
        if self._closed or con._closed:
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
    except Exception:  # noqa: BLE001 (sqlite3 ignores it too)
        if _callback_tracebacks:
            import traceback

            traceback.print_exc()


def _convert(conv, v):
    if conv is None or v is None:
        return v
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
