"""The SQLAlchemy dialect ``sqlite+pleroma://``.

SQLAlchemy's own SQLite dialect over the ``pysqlite`` driver, with
``pleroma`` as its DB-API module: the SQL, reflection and types are
SQLite's, and every statement goes through a Pleroma connection.

>>> from sqlalchemy import create_engine
>>> engine = create_engine("sqlite+pleroma:///ledger.db")  # doctest: +SKIP
"""

from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite


class PleromaDialect(SQLiteDialect_pysqlite):
    driver = "pleroma"
    supports_statement_cache = True

    @classmethod
    def import_dbapi(cls):
        import pleroma

        return pleroma

    @classmethod
    def dbapi(cls):  # SQLAlchemy 1.4 asks for the module by this name.
        return cls.import_dbapi()


dialect = PleromaDialect
