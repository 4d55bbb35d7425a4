"""Run CPython's own tests of the sqlite3 module against pleroma.

    python python/tools/cpython_suite.py [module ...]

The installed Python's `test.test_sqlite3` (the suite CPython ships,
where the interpreter has its test package) runs with
``sys.modules["sqlite3"] = pleroma``; prints, per module and in all, how
many tests ran, failed, raised and were skipped. A measure of how far the
drop-in goes, not a test of ours: what it fails on is listed in
docs/python.md.
"""

import importlib
import io
import sys
import unittest

import pleroma

MODULES = ["test_dbapi", "test_transactions", "test_types", "test_factory",
           "test_userfunctions", "test_hooks", "test_dump", "test_backup",
           "test_regression"]


def main(names):
    sys.modules["sqlite3"] = pleroma
    sys.modules["sqlite3.dbapi2"] = pleroma
    totals = [0, 0, 0, 0]
    for name in names or MODULES:
        try:
            module = importlib.import_module("test.test_sqlite3." + name)
        except ImportError as e:
            print(f"{name}: cannot import ({e})")
            continue
        suite = unittest.defaultTestLoader.loadTestsFromModule(module)
        r = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
        row = [r.testsRun, len(r.failures), len(r.errors), len(r.skipped)]
        totals = [a + b for a, b in zip(totals, row)]
        print(f"{name}: ran {row[0]}, failed {row[1]}, errors {row[2]}, skipped {row[3]}")
    ran, failed, errors, skipped = totals
    print(f"all: ran {ran}, passed {ran - failed - errors - skipped}, failed {failed}, "
          f"errors {errors}, skipped {skipped}")


if __name__ == "__main__":
    main(sys.argv[1:])
