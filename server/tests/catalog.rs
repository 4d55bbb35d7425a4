//! The emulated catalog (`server/src/catalog_db.rs`) through a client:
//! `information_schema` and `pg_catalog` rows made from SQLite's schema,
//! checked against SQLite's own description of the same file, and a query
//! of a catalog that is not emulated declined with its name.

mod common;

use common::simple_rows as rows;

use common::sqlite;
use tokio_postgres::NoTls;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn information_schema_and_pg_catalog_describe_the_file() {
    let f = common::fixture();
    {
        let mut c = pleroma::Connection::open(&f.db).unwrap();
        c.execute_batch("CREATE VIEW paid AS SELECT * FROM invoices WHERE status = 'paid';")
            .unwrap();
    }
    let server = common::serve(&f.db);
    let (client, conn) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=me dbname=ledger",
            server.addr().port()
        ),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);

    let got = rows(
        &client,
        "SELECT table_catalog, table_name, table_type FROM information_schema.tables \
         WHERE table_schema = 'public' ORDER BY table_name",
    )
    .await;
    let want = sqlite(
        &f.db,
        "SELECT 'ledger', name, CASE type WHEN 'view' THEN 'VIEW' ELSE 'BASE TABLE' END \
         FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
         ORDER BY name",
    );
    assert_eq!(got, want);

    let got = rows(
        &client,
        "SELECT column_name, ordinal_position, data_type, is_nullable, column_default \
         FROM information_schema.columns WHERE table_name = 'invoices' ORDER BY ordinal_position",
    )
    .await;
    let want = sqlite(
        &f.db,
        "SELECT name, cid + 1, CASE WHEN type LIKE '%INT%' THEN 'bigint' ELSE 'text' END, \
                CASE WHEN \"notnull\" OR pk THEN 'NO' ELSE 'YES' END, dflt_value \
         FROM pragma_table_info('invoices') ORDER BY cid",
    );
    assert_eq!(got, want);

    // pg_catalog, the way a driver joins it: each relation's columns.
    let got = rows(
        &client,
        "SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) \
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid \
         WHERE n.nspname = 'public' AND c.relkind = ANY (ARRAY['r', 'v']) AND c.relname::text IN ('kinds', 'paid') \
         ORDER BY c.relname, a.attnum",
    )
    .await;
    let want = sqlite(
        &f.db,
        "SELECT 'kinds', name, CASE type WHEN 'INTEGER' THEN 'bigint' WHEN 'REAL' THEN 'double precision' \
                WHEN 'BLOB' THEN 'bytea' ELSE 'text' END FROM pragma_table_info('kinds') \
         UNION ALL SELECT 'paid', name, CASE WHEN type LIKE '%INT%' THEN 'bigint' ELSE 'text' END \
         FROM pragma_table_info('paid')",
    );
    assert_eq!(got, want);

    // A catalog that is not emulated: an error naming it, not empty rows.
    let e = client
        .simple_query("SELECT conname FROM pg_catalog.pg_constraint")
        .await
        .unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code().code(), "0A000");
    assert!(db.message().contains("pg_constraint"), "{}", db.message());
}
