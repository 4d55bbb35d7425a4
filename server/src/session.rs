//! One client session: a thread that owns the session's
//! `pleroma::Connection` (which is `Send` but not `Sync`) and runs its
//! statements one at a time, in the order the client sent them.
//!
//! A panic while running a statement ends that session only: the thread
//! drops its connection (SQLite rolls back the open transaction) and the
//! client gets a FATAL error; no lock is shared between sessions here, so
//! nothing is left poisoned. When the client goes away the job channel
//! closes, the thread ends and the connection's transaction rolls back.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use pgwire::api::portal::Format;
use pgwire::api::results::FieldInfo;
use pgwire::error::ErrorInfo;
use pgwire::messages::data::DataRow;
use pgwire::messages::response::TransactionStatus;
use pleroma::{Connection, Value};

use crate::cursor::{self, Cursor, Cursors};
use crate::pg_catalog;
use crate::settings::{self, Answer, Settings};
use crate::sqlstate::{error, fatal, from_router};
use crate::translate;
use crate::wire::{self, ColType};
use crate::writers::{Turn, Writers};

/// How long a session waits for its turn to write, like SQLite's busy timeout.
pub(crate) const WRITE_WAIT: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce(&mut Engine) + Send>;

/// The async side's handle on a session thread.
pub(crate) struct Worker {
    jobs: mpsc::Sender<Job>,
    /// Numbers the jobs, for cancel requests (`cancel.rs`).
    numbers: Arc<crate::jobs::Jobs>,
}

impl Worker {
    /// Starts the session thread and opens its connection there.
    pub(crate) async fn start(
        path: PathBuf,
        startup: HashMap<String, String>,
        writers: Arc<Writers>,
    ) -> Result<Worker, ErrorInfo> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let numbers = Arc::new(crate::jobs::Jobs::default());
        let cancel = numbers.clone();
        std::thread::Builder::new()
            .name("pleroma-session".into())
            .spawn(move || {
                let opened = crate::jobs::open(&path, &cancel).and_then(|c| {
                    c.sqlite()
                        .busy_timeout(Duration::from_secs(5))
                        .map_err(pleroma::Error::from)?;
                    translate::register(c.sqlite()).map_err(pleroma::Error::from)?;
                    Ok(c)
                });
                let mut engine = match opened {
                    Ok(conn) => {
                        let _ = ready_tx.send(Ok(()));
                        Engine::new(conn, &startup, writers)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(fatal("58030", e.to_string())));
                        return;
                    }
                };
                while let Ok(job) = rx.recv() {
                    if catch_unwind(AssertUnwindSafe(|| job(&mut engine))).is_err() {
                        log!("pleroma serve: a session panicked; it was closed and its transaction rolled back");
                        break;
                    }
                }
            })
            .map_err(|e| fatal("53000", format!("cannot start a session thread: {e}")))?;
        match ready_rx.await {
            Ok(r) => r.map(|()| Worker { jobs, numbers }),
            Err(_) => Err(fatal("XX000", "the session thread ended while opening")),
        }
    }

    /// Runs `f` on the session's thread and waits for its answer.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> Result<R, ErrorInfo> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (numbers, number) = (self.numbers.clone(), self.numbers.submit());
        let job: Job = Box::new(move |e| {
            numbers.begin(number);
            let r = f(e);
            numbers.end();
            let _ = tx.send(r);
        });
        self.jobs
            .send(job)
            .map_err(|_| fatal("XX000", "this session has ended after an internal error"))?;
        rx.await.map_err(|_| {
            fatal(
                "XX000",
                "internal error (a panic) while running the statement; the session is closed \
                 and its transaction rolled back",
            )
        })
    }

    /// Interrupts the job this session's client waits for (a cancel request).
    pub(crate) fn cancel(&self) {
        self.numbers.cancel_last();
    }
}

/// How a statement moved the session's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnMove {
    Stay,
    Start,
    End,
}

/// What one statement answered, ready for the wire.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    Rows {
        fields: Vec<FieldInfo>,
        rows: Vec<DataRow>,
        /// "SELECT", or "INSERT 0" for INSERT ... RETURNING and the like.
        command: String,
    },
    Done {
        tag: String,
        rows: Option<usize>,
        txn: TxnMove,
    },
    Empty,
}

/// The columns a statement will return, before it runs.
pub(crate) struct Described {
    pub params: usize,
    pub columns: Vec<(String, ColType)>,
}

/// The session's state on its thread.
pub(crate) struct Engine {
    pub(crate) conn: Connection,
    settings: Settings,
    pub(crate) writers: Arc<Writers>,
    /// Held from the session's first write until it is out of its
    /// transaction.
    pub(crate) turn: Option<Turn>,
    /// The session's open cursors (`cursor.rs`).
    cursors: Cursors,
}

impl Engine {
    fn new(conn: Connection, startup: &HashMap<String, String>, writers: Arc<Writers>) -> Engine {
        Engine {
            conn,
            settings: Settings::new(startup),
            writers,
            turn: None,
            cursors: Cursors::default(),
        }
    }

    /// Whether a statement may write (then the session queues for its turn).
    fn writes(&self, sql: &str, words: &[String]) -> bool {
        let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
        match w(0) {
            "SELECT" | "VALUES" | "COMMIT" | "END" | "ROLLBACK" | "SAVEPOINT" | "RELEASE" => false,
            "BEGIN" => matches!(w(1), "IMMEDIATE" | "EXCLUSIVE"),
            // Pleroma's PRAGMAs that write its catalog; SQLite prepares any
            // unknown PRAGMA as a no-op.
            "PRAGMA" => matches!(
                w(1),
                "PLEROMA_ATTACH"
                    | "PLEROMA_DETACH"
                    | "PLEROMA_REBUILD"
                    | "PLEROMA_LIMB"
                    | "PLEROMA_PERSIST"
            ),
            _ => self
                .conn
                .sqlite()
                .prepare_cached(sql)
                .is_ok_and(|s| !s.readonly()),
        }
    }

    pub(crate) fn in_transaction(&self) -> bool {
        !self.conn.sqlite().is_autocommit()
    }

    /// A simple-protocol query: every statement in turn, stopping at the
    /// first error (which is the last element).
    pub(crate) fn simple(
        &mut self,
        sql: &str,
        status: TransactionStatus,
    ) -> Vec<Result<Outcome, ErrorInfo>> {
        let mut out = Vec::new();
        let mut status = status;
        for range in pleroma::split::statements(sql) {
            let stmt = &sql[range];
            let r = self.statement(stmt, &[], status, &Format::UnifiedText, None);
            match &r {
                Ok(Outcome::Done {
                    txn: TxnMove::Start,
                    ..
                }) => status = TransactionStatus::Transaction,
                Ok(Outcome::Done {
                    txn: TxnMove::End, ..
                }) => status = TransactionStatus::Idle,
                Err(_) => {
                    out.push(r);
                    return out;
                }
                _ => {}
            }
            out.push(r);
        }
        if out.is_empty() {
            out.push(Ok(Outcome::Empty));
        }
        out
    }

    /// One statement. `types` are the column types the client was told at
    /// Describe Statement; without them the values decide.
    pub(crate) fn statement(
        &mut self,
        sql: &str,
        params: &[Value],
        status: TransactionStatus,
        format: &Format,
        types: Option<&[ColType]>,
    ) -> Result<Outcome, ErrorInfo> {
        let words = leading_words(sql, 3);
        let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
        if words.is_empty() {
            return Ok(Outcome::Empty);
        }
        let is_commit = matches!(w(0), "COMMIT" | "END");
        let is_rollback = matches!(w(0), "ROLLBACK" | "ABORT") && !(w(1) == "TO" || w(2) == "TO");
        if is_commit || is_rollback || w(0) == "PREPARE" && w(1) == "TRANSACTION" {
            transaction_end_supported(sql)?;
        }
        // PostgreSQL's spellings that SQLite lacks: `ABORT`, and `WORK` or
        // `AND NO CHAIN` after the word.
        let ending = (is_commit || is_rollback) && transaction_end_words(sql);
        let sql = match (ending, is_commit) {
            (true, true) => "COMMIT",
            (true, false) => "ROLLBACK",
            (false, _) => sql,
        };
        // PostgreSQL aborts a transaction at its first error; SQLite keeps
        // it. Until the client ends it, nothing else runs, and COMMIT rolls
        // back, as PostgreSQL does.
        if status == TransactionStatus::Error {
            if is_commit || is_rollback {
                if self.in_transaction() {
                    self.conn
                        .execute("ROLLBACK", &[])
                        .map_err(|e| from_router(&e))?;
                }
                self.turn = None;
                return Ok(done("ROLLBACK", None, TxnMove::End));
            }
            return Err(error(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            ));
        }
        if (is_commit || is_rollback) && !self.in_transaction() {
            // PostgreSQL only warns about COMMIT/ROLLBACK outside a transaction.
            let tag = if is_commit { "COMMIT" } else { "ROLLBACK" };
            return Ok(done(tag, None, TxnMove::End));
        }
        if !self.in_transaction() {
            self.cursors.transaction_ended();
        }
        if let Some(cmd) = cursor::parse(sql) {
            return self.cursor(cmd?, params, format);
        }
        let mut sql = sql;
        let begins = w(0) == "START" && w(1) == "TRANSACTION" || w(0) == "BEGIN";
        if begins && self.in_transaction() {
            // PostgreSQL only warns, and the transaction goes on.
            let tag = if w(0) == "START" {
                "START TRANSACTION"
            } else {
                "BEGIN"
            };
            return Ok(done(tag, None, TxnMove::Stay));
        }
        if w(0) == "START" && w(1) == "TRANSACTION" || w(0) == "BEGIN" && is_pg_txn_mode(w(1)) {
            let all = leading_words(sql, usize::MAX);
            if all.windows(2).any(|p| p[0] == "READ" && p[1] == "ONLY") {
                return Err(settings::read_only());
            }
            sql = "BEGIN";
        }
        if let Some(cmd) = settings::parse(sql) {
            return match self.settings.run(cmd?)? {
                Answer::Tag(t) => Ok(done(t, None, TxnMove::Stay)),
                Answer::Rows(names, rows) => {
                    let rows: Vec<Vec<Value>> = rows
                        .into_iter()
                        .map(|r| r.into_iter().map(Value::Text).collect())
                        .collect();
                    let types = vec![ColType::Text; names.len()];
                    rows_outcome(&names, &rows, &types, format, "SELECT")
                }
            };
        }
        if let Some(answer) = pg_catalog::answer(self.conn.sqlite(), sql, params) {
            let (rows, bools) = answer?;
            let types: Vec<ColType> = (0..rows.columns.len())
                .map(|c| {
                    let values = || rows.rows.iter().map(|r| &r[c]);
                    let flags = values()
                        .all(|v| matches!(v, Value::Null | Value::Integer(0) | Value::Integer(1)));
                    if bools[c] && flags {
                        ColType::Bool
                    } else {
                        ColType::of_values(values(), false)
                    }
                })
                .collect();
            return rows_outcome(&rows.columns, &rows.rows, &types, format, "SELECT");
        }
        let explained;
        let sql = match explained_statement(sql, &words) {
            // The statement explained as the server runs it.
            Some(inner) => {
                let (inner, _) = translate::to_sqlite_bound(&inner)?;
                explained = format!("PRAGMA pleroma_explain('{}')", inner.replace('\'', "''"));
                explained.as_str()
            }
            None => sql,
        };
        let (translated, casts) = translate::to_sqlite_bound(sql)?;
        let cast;
        let params = if casts.is_empty() {
            params
        } else {
            cast = translate::cast_params(params, &casts)?;
            &cast[..]
        };
        let rewritten = wire::numbered_placeholders(&translated);
        let sql: &str = &rewritten;
        let before = self.in_transaction();
        if self.turn.is_none() && self.writes(sql, &words) {
            self.turn = Some(self.writers.wait(WRITE_WAIT).ok_or_else(|| {
                error(
                    "55P03",
                    "database is locked: other sessions held the write lock for 5 s",
                )
            })?);
        }
        let result = self.conn.query(sql, params);
        let after = self.in_transaction();
        if !after {
            self.turn = None;
        }
        let rows = result.map_err(|e| from_router(&e))?;
        let txn = match (before, after) {
            (false, true) => TxnMove::Start,
            (true, false) => TxnMove::End,
            _ => TxnMove::Stay,
        };
        if rows.columns.is_empty() {
            // The user's count, as `changes()` gives it: not Pleroma's state rows.
            let changes = self.conn.changes() as usize;
            let (tag, n) = match w(0) {
                "INSERT" | "REPLACE" => ("INSERT 0".to_owned(), Some(changes)),
                "UPDATE" => ("UPDATE".to_owned(), Some(changes)),
                "DELETE" => ("DELETE".to_owned(), Some(changes)),
                "BEGIN" => ("BEGIN".to_owned(), None),
                "END" => ("COMMIT".to_owned(), None),
                "ABORT" => ("ROLLBACK".to_owned(), None),
                "START" => ("START TRANSACTION".to_owned(), None),
                "CREATE" | "DROP" | "ALTER" => (format!("{} {}", w(0), w(1)), None),
                other => (other.to_owned(), None),
            };
            return Ok(Outcome::Done { tag, rows: n, txn });
        }
        let types: Vec<ColType> = match types {
            Some(t) if t.len() == rows.columns.len() => t.to_vec(),
            Some(t) => {
                return Err(error(
                    "0A000",
                    format!(
                        "the statement was described with {} columns but returned {}",
                        t.len(),
                        rows.columns.len()
                    ),
                ))
            }
            None => {
                let sums = exact_sum_columns(sql, rows.columns.len());
                (0..rows.columns.len())
                    .map(|c| ColType::of_values(rows.rows.iter().map(|r| &r[c]), sums[c]))
                    .collect()
            }
        };
        let command = match w(0) {
            "INSERT" | "REPLACE" => "INSERT 0",
            "UPDATE" => "UPDATE",
            "DELETE" => "DELETE",
            _ => "SELECT",
        };
        rows_outcome(&rows.columns, &rows.rows, &types, format, command)
    }

    /// DECLARE, FETCH, MOVE or CLOSE of a cursor.
    fn cursor(
        &mut self,
        cmd: cursor::Command<'_>,
        params: &[Value],
        format: &Format,
    ) -> Result<Outcome, ErrorInfo> {
        let missing = |name: &str| error("34000", format!("cursor \"{name}\" does not exist"));
        match cmd {
            cursor::Command::Declare { name, hold, query } => {
                if !hold && !self.in_transaction() {
                    return Err(error(
                        "25P01",
                        "DECLARE CURSOR can only be used in transaction blocks",
                    ));
                }
                if self.cursors.0.contains_key(&name) {
                    return Err(error("42P03", format!("cursor \"{name}\" already exists")));
                }
                let translated = translate::to_sqlite(query)?;
                let sql = wire::numbered_placeholders(&translated);
                let read_only = self
                    .conn
                    .sqlite()
                    .prepare_cached(&sql)
                    .map_err(|e| from_router(&pleroma::Error::Sqlite(e)))?
                    .readonly();
                if !read_only {
                    return Err(error(
                        "42601",
                        "a cursor's query must be a SELECT or VALUES statement",
                    ));
                }
                let rows = self.conn.query(&sql, params).map_err(|e| from_router(&e))?;
                let sums = exact_sum_columns(&sql, rows.columns.len());
                let types = (0..rows.columns.len())
                    .map(|c| ColType::of_values(rows.rows.iter().map(|r| &r[c]), sums[c]))
                    .collect();
                let cursor = Cursor::new(rows.columns.to_vec(), types, rows.rows.to_vec(), hold);
                self.cursors.0.insert(name, cursor);
                Ok(done("DECLARE CURSOR", None, TxnMove::Stay))
            }
            cursor::Command::Fetch { name, count, rows } => {
                let c = self
                    .cursors
                    .0
                    .get_mut(&name)
                    .ok_or_else(|| missing(&name))?;
                let range = c.take(count);
                if rows {
                    rows_outcome(&c.columns, &c.rows[range], &c.types, format, "FETCH")
                } else {
                    Ok(done("MOVE", Some(range.len()), TxnMove::Stay))
                }
            }
            cursor::Command::Close(Some(name)) => {
                self.cursors.0.remove(&name).ok_or_else(|| missing(&name))?;
                Ok(done("CLOSE CURSOR", None, TxnMove::Stay))
            }
            cursor::Command::Close(None) => {
                self.cursors.0.clear();
                Ok(done("CLOSE CURSOR", None, TxnMove::Stay))
            }
        }
    }

    /// The parameters and columns of a statement, without running it, for
    /// Describe Statement: column types come from SQLite's declared types.
    pub(crate) fn describe(&mut self, sql: &str) -> Result<Described, ErrorInfo> {
        let words = leading_words(sql, 2);
        let w0 = words.first().map(String::as_str).unwrap_or("");
        if let Some(cmd) = settings::parse(sql) {
            let columns = match cmd? {
                settings::Command::Show(Some(name)) => vec![(name, ColType::Text)],
                settings::Command::Show(None) => vec![
                    ("name".into(), ColType::Text),
                    ("setting".into(), ColType::Text),
                ],
                _ => vec![],
            };
            return Ok(Described { params: 0, columns });
        }
        if matches!(w0, "FETCH" | "MOVE") {
            return Err(error(
                "0A000",
                "pleroma serve cannot describe FETCH before it runs: send it with the simple \
                 protocol or an unnamed statement",
            ));
        }
        if matches!(
            w0,
            "BEGIN"
                | "START"
                | "COMMIT"
                | "END"
                | "ROLLBACK"
                | "ABORT"
                | "SAVEPOINT"
                | "RELEASE"
                | "DECLARE"
                | "CLOSE"
        ) || words.is_empty()
        {
            return Ok(Described {
                params: 0,
                columns: vec![],
            });
        }
        if pg_catalog::is_catalog_query(sql)
            || (w0 == "PRAGMA" && sql.to_ascii_lowercase().contains("pleroma_"))
        {
            return Err(error(
                "0A000",
                "pleroma serve cannot describe this statement before it runs (catalog queries and \
                 PRAGMA pleroma_*): send it with the simple protocol or an unnamed statement",
            ));
        }
        let translated = translate::to_sqlite(sql)?;
        let sql = wire::numbered_placeholders(&translated);
        let stmt = self
            .conn
            .sqlite()
            .prepare_cached(&sql)
            .map_err(|e| from_router(&pleroma::Error::Sqlite(e)))?;
        let sums = exact_sum_columns(&sql, stmt.column_count());
        let columns = stmt
            .columns()
            .zip(sums)
            .map(|(c, s)| (c.name().to_owned(), ColType::of_decl(c.decl_type(), s)))
            .collect();
        Ok(Described {
            params: stmt.parameter_count(),
            columns,
        })
    }
}

fn done(tag: &str, rows: Option<usize>, txn: TxnMove) -> Outcome {
    Outcome::Done {
        tag: tag.to_owned(),
        rows,
        txn,
    }
}

fn rows_outcome(
    names: &[String],
    rows: &[Vec<Value>],
    types: &[ColType],
    format: &Format,
    command: &str,
) -> Result<Outcome, ErrorInfo> {
    Ok(Outcome::Rows {
        fields: wire::fields(names, types, format)?,
        rows: wire::encode_rows(names, rows, types, format)?,
        command: command.to_owned(),
    })
}

/// `BEGIN ISOLATION LEVEL ...`, `BEGIN READ WRITE`: PostgreSQL's modes,
/// which SQLite's BEGIN lacks; its transactions are serializable.
/// The statement of `PRAGMA pleroma_explain('…')`, which the server
/// translates as it would translate the statement itself.
fn explained_statement(sql: &str, words: &[String]) -> Option<String> {
    if words.len() < 2 || words[0] != "PRAGMA" || words[1] != "PLEROMA_EXPLAIN" {
        return None;
    }
    let code: Vec<_> = pleroma::tokenize::code(sql)
        .filter(|t| t.text != ";")
        .collect();
    match &code[..] {
        [_, _, open, arg, close]
            if open.text == "("
                && close.text == ")"
                && arg.kind == pleroma::tokenize::Kind::String =>
        {
            Some(arg.value().into_owned())
        }
        _ => None,
    }
}

/// Whether `sql` is a word that ends a transaction followed only by
/// PostgreSQL's optional `WORK` or `TRANSACTION` and `AND NO CHAIN`.
fn transaction_end_words(sql: &str) -> bool {
    let words: Vec<String> = pleroma::tokenize::code(sql)
        .filter(|t| t.text != ";")
        .map(|t| t.text.to_ascii_uppercase())
        .collect();
    let rest: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    matches!(
        rest[..],
        [] | ["WORK" | "TRANSACTION"]
            | ["AND", "NO", "CHAIN"]
            | ["WORK" | "TRANSACTION", "AND", "NO", "CHAIN"]
    )
}

fn is_pg_txn_mode(w: &str) -> bool {
    matches!(
        w,
        "ISOLATION" | "READ" | "NOT" | "WORK" | "TRANSACTION" | "DEFERRABLE"
    )
}

/// An error for the ends of a transaction pleroma serve does not take:
/// `AND CHAIN` and two-phase commit (`0A000`), and any other word after
/// `COMMIT`, `END`, `ROLLBACK` or `ABORT` than PostgreSQL's optional ones
/// (a syntax error, `42601`, as in PostgreSQL; SQLite would ignore a
/// transaction name).
fn transaction_end_supported(sql: &str) -> Result<(), ErrorInfo> {
    let words: Vec<String> = pleroma::tokenize::code(sql)
        .filter(|t| t.text != ";")
        .map(|t| t.text.to_ascii_uppercase())
        .collect();
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    if w(1) == "PREPARED" || w(0) == "PREPARE" {
        return Err(error(
            "0A000",
            "two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED, ROLLBACK PREPARED) is not \
             supported by pleroma serve",
        ));
    }
    if words.windows(2).any(|p| p[0] == "AND" && p[1] == "CHAIN") {
        return Err(error(
            "0A000",
            format!("{} AND CHAIN is not supported by pleroma serve", w(0)),
        ));
    }
    if w(0) == "ROLLBACK" && (w(1) == "TO" || w(2) == "TO") || transaction_end_words(sql) {
        return Ok(());
    }
    let at = w(if matches!(w(1), "WORK" | "TRANSACTION") {
        2
    } else {
        1
    });
    Err(error("42601", format!("syntax error at or near \"{at}\"")))
}

/// The first `n` words of a statement, upper-cased, past comments.
pub(crate) fn leading_words(sql: &str, n: usize) -> Vec<String> {
    // The words as SQLite's tokenizer reads them (comments skipped).
    pleroma::tokenize::code(sql)
        .filter(|t| t.kind == pleroma::tokenize::Kind::Word)
        .take(n)
        .map(|t| t.text.to_ascii_uppercase())
        .collect()
}

/// Which result columns are a bare `PleromaSumExact(...)` (aliased or not)
/// in the statement's top-level SELECT list: their integer text goes out as
/// numeric. Anything the parser does not see that way stays text.
fn exact_sum_columns(sql: &str, n: usize) -> Vec<bool> {
    use sqlparser as sp;
    let mut out = vec![false; n];
    // Parsed only when it can matter: a full parse of every statement was
    // a sixth of a served call's server time.
    const NAME: &[u8] = b"pleromasumexact";
    if !sql
        .as_bytes()
        .windows(NAME.len())
        .any(|w| w.eq_ignore_ascii_case(NAME))
    {
        return out;
    }
    let Ok(stmts) = sp::parser::Parser::parse_sql(&sp::dialect::SQLiteDialect {}, sql) else {
        return out;
    };
    let Some(sp::ast::Statement::Query(q)) = stmts.first() else {
        return out;
    };
    let sp::ast::SetExpr::Select(sel) = q.body.as_ref() else {
        return out;
    };
    if sel.projection.len() != n {
        return out;
    }
    for (i, item) in sel.projection.iter().enumerate() {
        let expr = match item {
            sp::ast::SelectItem::UnnamedExpr(e) => e,
            sp::ast::SelectItem::ExprWithAlias { expr, .. } => expr,
            _ => continue,
        };
        if let sp::ast::Expr::Function(f) = expr {
            out[i] = f.name.to_string().eq_ignore_ascii_case("PleromaSumExact");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_ends_its_session_only_and_rolls_its_transaction_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        {
            let mut c = Connection::open(&path).unwrap();
            c.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(x INTEGER);")
                .unwrap();
        }
        let writers = Arc::new(Writers::default());
        let a = Worker::start(path.clone(), HashMap::new(), writers.clone())
            .await
            .unwrap();
        let b = Worker::start(path.clone(), HashMap::new(), writers)
            .await
            .unwrap();
        let idle = TransactionStatus::Idle;
        a.run(move |e| e.simple("BEGIN; INSERT INTO t VALUES (1)", idle))
            .await
            .unwrap();
        let e = a
            .run(|_: &mut Engine| -> () { panic!("a bug in a statement") })
            .await
            .unwrap_err();
        assert_eq!(e.severity, "FATAL");
        assert!(
            a.run(|e| e.in_transaction()).await.is_err(),
            "the session is closed"
        );
        // The other session writes (the lock was released) and never saw 1.
        let out = b
            .run(move |e| {
                e.simple("INSERT INTO t VALUES (2)", idle);
                e.conn
                    .query("SELECT group_concat(x) FROM t", &[])
                    .unwrap()
                    .rows
            })
            .await
            .unwrap();
        assert_eq!(out, [[Value::Text("2".into())]]);
    }

    #[test]
    fn a_pleroma_pragma_writes_by_its_name_not_by_a_string_or_comment() {
        let e = Engine::new(
            Connection::open_in_memory().unwrap(),
            &HashMap::new(),
            Arc::new(Writers::default()),
        );
        let writes = |sql: &str| e.writes(sql, &leading_words(sql, 3));
        assert!(writes("PRAGMA pleroma_attach('t', 'a', 'm')"));
        assert!(writes("/* c */ pragma Pleroma_Detach('t')"));
        assert!(writes("PRAGMA pleroma_persist = off"));
        assert!(!writes("PRAGMA table_info('pleroma_attach')"));
        assert!(!writes("PRAGMA pleroma_planes /* pleroma_rebuild */"));
        assert!(!writes("SELECT 1 -- pleroma_limb"));
    }
}
