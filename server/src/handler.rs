//! The pgwire handlers of one client connection: startup and
//! authentication, the simple and the extended query protocol.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use futures::{stream, Sink, SinkExt};
use pgwire::api::auth::sasl::scram::{ScramAuth, ScramSecret};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, AuthSource,
    DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeResponse, DescribeStatementResponse, FieldInfo,
    QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{NoopQueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionManager, PgWireServerHandlers, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator, Type, DEFAULT_NAME,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::extendedquery::Sync as PgSync;
use pgwire::messages::response::ReadyForQuery;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pleroma::Value;

use crate::cancel::{self, Registration};
use crate::copy;
use crate::session::{Engine, Outcome, TxnMove, Worker};
use crate::settings::SERVER_VERSION;
use crate::sqlstate::{error, fatal};
use crate::users::Users;
use crate::wire::{self, ColType};
use crate::writers::Writers;

fn user_error(e: pgwire::error::ErrorInfo) -> PgWireError {
    PgWireError::UserError(Box::new(e))
}

pub(crate) fn parameters() -> DefaultServerParameterProvider {
    let mut p = DefaultServerParameterProvider::default();
    p.server_version = SERVER_VERSION.to_owned();
    p.time_zone = "UTC".to_owned();
    p
}

/// Who may connect.
pub(crate) enum Auth {
    /// No users file: loopback only, every client trusted.
    Trust,
    /// SCRAM-SHA-256 against the users file.
    Scram(Arc<Users>, Arc<ScramAuth>),
}

#[derive(Debug)]
struct UsersSource(Arc<Users>);

#[async_trait]
impl AuthSource for UsersSource {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        Err(PgWireError::InvalidPassword(
            login.user().unwrap_or_default().to_owned(),
        ))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        let name = login.user().unwrap_or_default();
        match self.0.users.get(name) {
            Some(u) => Ok((u.secret(), None)),
            None => Err(PgWireError::InvalidPassword(name.to_owned())),
        }
    }
}

/// SCRAM-SHA-256 against the users' verifiers; with the server's
/// certificate also SCRAM-SHA-256-PLUS (channel binding to the TLS session).
pub(crate) fn scram(users: Arc<Users>, cert_pem: Option<&[u8]>) -> PgWireResult<Arc<ScramAuth>> {
    let mut s = ScramAuth::new(Arc::new(UsersSource(users.clone())));
    s.set_iterations(pgwire::api::auth::sasl::scram::SCRAM_ITERATIONS);
    if let Some(pem) = cert_pem {
        s.configure_certificate(pem)?;
    }
    Ok(Arc::new(s))
}

pub(crate) struct Startup {
    auth: Arc<Auth>,
    pids: Arc<RandomPidSecretKeyGenerator>,
    sasl: Option<SASLAuthStartupHandler<DefaultServerParameterProvider>>,
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match (&*self.auth, &self.sasl) {
            (Auth::Trust, _) => {
                if let PgWireFrontendMessage::Startup(ref startup) = message {
                    protocol_negotiation(client, startup).await?;
                    save_startup_parameters_to_metadata(client, startup);
                    let (pid, key) = self.pids.generate(client);
                    client.set_pid_and_secret_key(pid, key);
                    finish_authentication(client, &parameters()).await?;
                }
                Ok(())
            }
            (Auth::Scram(users, _), Some(sasl)) => {
                if let PgWireFrontendMessage::Startup(ref startup) = message {
                    let user = startup.parameters.get("user").cloned().unwrap_or_default();
                    if let Some(u) = users.users.get(&user) {
                        if u.tls_required && !client.is_secure() {
                            log!(
                                "pleroma serve: refused {user:?} from {}: TLS required",
                                client.socket_addr()
                            );
                            return Err(user_error(fatal(
                                "28000",
                                format!(
                                    "user \"{user}\" may only connect over TLS (sslmode=require)"
                                ),
                            )));
                        }
                    }
                    let (pid, key) = self.pids.generate(client);
                    client.set_pid_and_secret_key(pid, key);
                }
                let r = sasl.on_startup(client, message).await;
                if let Err(e) = &r {
                    let user = client
                        .metadata()
                        .get(pgwire::api::METADATA_USER)
                        .cloned()
                        .unwrap_or_default();
                    log!(
                        "pleroma serve: authentication of {user:?} from {} failed: {e}",
                        client.socket_addr()
                    );
                    if let PgWireError::InvalidPassword(_) = e {
                        // PostgreSQL's words, with the user's name.
                        return Err(user_error(fatal(
                            "28P01",
                            format!("password authentication failed for user \"{user}\""),
                        )));
                    }
                }
                r
            }
            (Auth::Scram(..), None) => unreachable!("a SCRAM startup handler has its SASL handler"),
        }
    }
}

/// A result described at Describe Portal, kept until that portal runs.
struct Pending {
    portal: String,
    sql: String,
    params: Vec<Option<bytes::Bytes>>,
    outcome: Result<Outcome, pgwire::error::ErrorInfo>,
}

/// The handlers of one connection.
pub(crate) struct Session {
    path: PathBuf,
    writers: Arc<Writers>,
    worker: tokio::sync::OnceCell<Worker>,
    pending: Mutex<Vec<Pending>>,
    parser: Arc<NoopQueryParser>,
    /// The server's cancel registry, and this session's entry in it.
    cancels: Arc<ConnectionManager>,
    registration: OnceLock<Registration>,
    /// A COPY FROM between its messages.
    pub(crate) copy_in: copy::Pending,
}

impl Session {
    pub(crate) fn new(
        path: PathBuf,
        writers: Arc<Writers>,
        cancels: Arc<ConnectionManager>,
    ) -> Session {
        Session {
            path,
            writers,
            worker: tokio::sync::OnceCell::new(),
            pending: Mutex::new(Vec::new()),
            parser: Arc::new(NoopQueryParser::new()),
            cancels,
            registration: OnceLock::new(),
            copy_in: copy::Pending::default(),
        }
    }

    /// Runs `f` on the session's thread; a cancel request interrupts it. A
    /// COPY FROM the client left unfinished is rolled back first.
    pub(crate) async fn run<C: ClientInfo + Send + Sync, R: Send + 'static>(
        &self,
        client: &C,
        f: impl FnOnce(&mut Engine) -> R + Send + 'static,
    ) -> PgWireResult<R> {
        let registration = self
            .registration
            .get_or_init(|| Registration::new(&self.cancels, client));
        let stale = self.copy_in.take();
        cancel::run(registration, self.worker(client), move |e| {
            if let Some(copy) = stale {
                copy.abort(e);
            }
            f(e)
        })
        .await
    }

    async fn worker<C: ClientInfo>(&self, client: &C) -> PgWireResult<&Worker> {
        let startup = client.metadata().clone();
        self.worker
            .get_or_try_init(|| Worker::start(self.path.clone(), startup, self.writers.clone()))
            .await
            .map_err(user_error)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        // A panic never happens while this lock is held (only pushes and
        // removals); a poisoned lock still holds valid data.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn to_response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Rows {
            fields,
            rows,
            command,
        } => {
            let mut q =
                QueryResponse::new(Arc::new(fields), stream::iter(rows.into_iter().map(Ok)));
            q.set_command_tag(&command);
            Response::Query(q)
        }
        Outcome::Done { tag, rows, txn } => {
            let mut t = Tag::new(&tag);
            if let Some(n) = rows {
                t = t.with_rows(n);
            }
            match txn {
                TxnMove::Stay => Response::Execution(t),
                TxnMove::Start => Response::TransactionStart(t),
                TxnMove::End => Response::TransactionEnd(t),
            }
        }
        Outcome::Empty => Response::EmptyQuery,
    }
}

#[async_trait]
impl SimpleQueryHandler for Session {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(cmd) = copy::in_query(query) {
            return Ok(vec![
                execute_copy(self, client, cmd.map_err(user_error)?).await?,
            ]);
        }
        if let Some(target) = deallocate(query) {
            // Prepared statements live in pgwire's store, not in SQLite.
            let tag = match target {
                Some(name) => {
                    client.portal_store().rm_statement(&name);
                    "DEALLOCATE"
                }
                None => "DEALLOCATE ALL",
            };
            return Ok(vec![Response::Execution(Tag::new(tag))]);
        }
        let status = client.transaction_status();
        let sql = query.to_owned();
        let outcomes = self.run(&*client, move |e| e.simple(&sql, status)).await?;
        Ok(outcomes
            .into_iter()
            .map(|o| match o {
                Ok(o) => to_response(o),
                Err(e) => Response::Error(Box::new(e)),
            })
            .collect())
    }
}

/// The parameters of a portal as SQLite values.
/// `DEALLOCATE [PREPARE] name` (`Some(name)`) or `DEALLOCATE [PREPARE] ALL`
/// (`None`), alone in a query: what psycopg sends when it resets. After
/// `ALL` the client prepares its statements again under new or the same
/// names (a Parse replaces a statement of the same name).
fn deallocate(query: &str) -> Option<Option<String>> {
    let words: Vec<_> = pleroma::tokenize::code(query)
        .filter(|t| t.kind != pleroma::tokenize::Kind::Semi)
        .collect();
    let rest = match &words[..] {
        [d, rest @ ..] if d.is("deallocate") => rest,
        _ => return None,
    };
    let rest = match rest {
        [p, rest @ ..] if p.is("prepare") => rest,
        _ => rest,
    };
    match rest {
        [a] if a.is("all") => Some(None),
        [n] if matches!(
            n.kind,
            pleroma::tokenize::Kind::Word | pleroma::tokenize::Kind::Quoted
        ) =>
        {
            Some(Some(n.value().into_owned()))
        }
        _ => None,
    }
}

fn params(portal: &Portal<String>) -> PgWireResult<Vec<Value>> {
    (0..portal.parameter_len())
        .map(|i| {
            let ty = portal
                .statement
                .parameter_types
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or(Type::UNKNOWN);
            let binary = match &portal.parameter_format {
                Format::Individual(codes) if i >= codes.len() => {
                    return Err(user_error(error(
                        "08P01",
                        "bind message has too few parameter formats",
                    )))
                }
                f => f.is_binary(i),
            };
            wire::param(portal.parameters[i].as_deref(), &ty, binary)
                .map_err(|m| user_error(error("22P02", format!("parameter ${}: {m}", i + 1))))
        })
        .collect()
}

#[async_trait]
impl ExtendedQueryHandler for Session {
    type Statement = String;
    type QueryParser = NoopQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = portal.statement.statement.clone();
        if let Some(cmd) = copy::in_query(&sql) {
            return execute_copy(self, client, cmd.map_err(user_error)?).await;
        }
        // Described at Describe Portal: it already ran, with the types the
        // client was told.
        let described = {
            let mut pending = self.pending();
            let at = pending.iter().position(|p| {
                p.portal == portal.name && p.sql == sql && p.params == portal.parameters
            });
            at.map(|i| pending.swap_remove(i))
        };
        let outcome = match described {
            Some(p) => p.outcome,
            None => {
                let values = params(portal)?;
                let status = client.transaction_status();
                let format = portal.result_column_format.clone();
                self.run(&*client, move |e| {
                    // The client decodes by what Describe Statement said.
                    let types: Vec<ColType> = match e.describe(&sql) {
                        Ok(d) => d.columns.iter().map(|c| c.1).collect(),
                        Err(err) => return Err(err),
                    };
                    e.statement(&sql, &values, status, &format, Some(&types))
                })
                .await?
            }
        };
        outcome.map(to_response).map_err(user_error)
    }

    async fn do_describe_statement<C>(
        &self,
        client: &mut C,
        stmt: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = stmt.statement.clone();
        if copy::is_copy(&sql) {
            return Ok(DescribeStatementResponse::no_data());
        }
        let d = self
            .run(&*client, move |e| e.describe(&sql))
            .await?
            .map_err(user_error)?;
        // A parameter the client left untyped (OID 0) is text: bound as
        // TEXT, SQLite's affinity decides, as for a quoted literal.
        let param_types = (0..d.params.max(stmt.parameter_types.len()))
            .map(|i| {
                stmt.parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .filter(|t| *t != Type::UNKNOWN)
                    .unwrap_or(Type::TEXT)
            })
            .collect();
        let names: Vec<String> = d.columns.iter().map(|c| c.0.clone()).collect();
        let types: Vec<ColType> = d.columns.iter().map(|c| c.1).collect();
        let fields: Vec<FieldInfo> =
            wire::fields(&names, &types, &Format::UnifiedText).map_err(user_error)?;
        Ok(DescribeStatementResponse::new(param_types, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // The types of a column come from its values, so the portal runs
        // now and Execute sends what it answered.
        let sql = portal.statement.statement.clone();
        if copy::is_copy(&sql) {
            // A COPY runs at Execute; it describes no rows.
            return Ok(DescribePortalResponse::no_data());
        }
        let values = params(portal)?;
        let status = client.transaction_status();
        let format = portal.result_column_format.clone();
        let outcome = self
            .run(&*client, move |e| {
                e.statement(&sql, &values, status, &format, None)
            })
            .await?;
        let response = match &outcome {
            Ok(Outcome::Rows { fields, .. }) => DescribePortalResponse::new(fields.clone()),
            Ok(_) => DescribePortalResponse::no_data(),
            Err(e) => return Err(user_error(copy_error(e))),
        };
        let mut pending = self.pending();
        pending.retain(|p| p.portal != portal.name);
        pending.push(Pending {
            portal: portal.name.clone(),
            sql: portal.statement.statement.clone(),
            params: portal.parameters.clone(),
            outcome,
        });
        Ok(response)
    }

    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // The unnamed portal ends at Sync; so does an answer kept for it.
        self.pending().retain(|p| p.portal != DEFAULT_NAME);
        client.portal_store().rm_portal(DEFAULT_NAME);
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                client.transaction_status(),
            )))
            .await?;
        client.flush().await?;
        Ok(())
    }
}

/// One connection's handlers, as pgwire asks for them.
pub(crate) struct Handlers {
    pub(crate) session: Arc<Session>,
    pub(crate) startup: Arc<Startup>,
    pub(crate) cancels: Arc<ConnectionManager>,
}

impl Handlers {
    pub(crate) fn new(
        path: PathBuf,
        auth: Arc<Auth>,
        pids: Arc<RandomPidSecretKeyGenerator>,
        writers: Arc<Writers>,
        cancels: Arc<ConnectionManager>,
    ) -> Handlers {
        let sasl = match &*auth {
            Auth::Trust => None,
            Auth::Scram(_, scram) => Some(
                SASLAuthStartupHandler::new(Arc::new(parameters())).with_scram((**scram).clone()),
            ),
        };
        Handlers {
            session: Arc::new(Session::new(path, writers, cancels.clone())),
            startup: Arc::new(Startup { auth, pids, sasl }),
            cancels,
        }
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.session.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.session.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.session.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::new(DefaultCancelHandler::new(self.cancels.clone()))
    }
}

fn copy_error(e: &pgwire::error::ErrorInfo) -> pgwire::error::ErrorInfo {
    let mut c =
        pgwire::error::ErrorInfo::new(e.severity.clone(), e.code.clone(), e.message.clone());
    c.detail = e.detail.clone();
    c.hint = e.hint.clone();
    c
}

/// Runs a COPY statement. COPY TO sends its CopyOutResponse, CopyData and
/// CopyDone here and answers the `COPY n` tag; COPY FROM answers the
/// CopyInResponse and goes on in [`CopyHandler`].
pub(crate) async fn execute_copy<C>(
    session: &Session,
    client: &mut C,
    cmd: copy::Command,
) -> PgWireResult<Response>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let status = client.transaction_status();
    if cmd.from {
        let inbound = session
            .run(client, move |e| copy::copy_from(e, cmd, status))
            .await?
            .map_err(user_error)?;
        let columns = inbound.columns();
        session.copy_in.put(inbound);
        return Ok(Response::CopyIn(CopyResponse::new(
            0,
            columns,
            stream::empty(),
        )));
    }
    let out = session
        .run(client, move |e| copy::copy_to(e, &cmd, status))
        .await?
        .map_err(user_error)?;
    // Sent here rather than as a `Response::CopyOut`, whose tag counts
    // CopyData messages: a header line would be counted as a row.
    client
        .feed(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
            0,
            out.columns as i16,
            vec![0; out.columns],
        )))
        .await?;
    for line in out.lines {
        client
            .feed(PgWireBackendMessage::CopyData(CopyData::new(line)))
            .await?;
    }
    client
        .feed(PgWireBackendMessage::CopyDone(CopyDone::new()))
        .await?;
    Ok(Response::Execution(Tag::new("COPY").with_rows(out.rows)))
}

#[async_trait]
impl CopyHandler for Session {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(mut inbound) = self.copy_in.take() else {
            return Ok(());
        };
        let data = copy_data.data;
        let (inbound, r) = self
            .run(client, move |e| match inbound.feed(e, &data) {
                Ok(()) => (Some(inbound), Ok(())),
                Err(err) => {
                    inbound.abort(e);
                    (None, Err(err))
                }
            })
            .await?;
        if let Some(inbound) = inbound {
            self.copy_in.put(inbound);
        }
        r.map_err(user_error)
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(mut inbound) = self.copy_in.take() else {
            return Err(user_error(error("08P01", "CopyDone without a COPY FROM")));
        };
        let n = self
            .run(client, move |e| {
                let r = inbound.finish(e);
                if r.is_err() {
                    inbound.abort(e);
                }
                r
            })
            .await?
            .map_err(user_error)?;
        client
            .send(PgWireBackendMessage::CommandComplete(
                Tag::new("COPY").with_rows(n).into(),
            ))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(inbound) = self.copy_in.take() {
            if let Err(e) = self.run(client, move |e| inbound.abort(e)).await {
                return e;
            }
        }
        user_error(error(
            "57014",
            format!("COPY from stdin failed: {}", fail.message),
        ))
    }
}
