//! TPC-C on the SQL engines: SQLite (a file of this process), MariaDB and PostgreSQL (servers
//! alloclab started). Each opens its database (creating the `schema` where it is missing) and
//! gives sessions in every mode it runs: rows (`sql_tx`), statements (`stmts`) and, on the
//! servers, procedures (`procs`). The connections, and which client library each mode goes
//! through, are `crate::sql`'s.

use anyhow::Result;

use super::procs::{self, MariaProcs, PgProcs};
use super::schema::{schema, tables};
use super::spec::Mode;
use super::sql_tx::SqlTx;
use super::stmts::StmtSession;
use super::traits::{TpccDb, TpccTx, TxnSession};
use super::transactions::RowSession;
use crate::engines::sqlite::SqliteFile;
use crate::engines::{DbError, EngineOptions};
use crate::sql::mariadb::MariaConn;
use crate::sql::postgres::PgConn;
use crate::sql::sqlite::SqliteConn;
use crate::sql::{mariadb_statements, postgres_statements, Dialect, Server, SqlConn};

/// A connection's error, as the run's.
fn any(e: DbError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Create the schema in a server's database that has no TPC-C tables yet (`probe` reads a row
/// where it has them).
fn create_schema(c: &mut impl SqlConn, probe: &str, schema: &[String]) -> Result<()> {
    if c.query(probe, &[]).map_err(any)?.is_empty() {
        for stmt in schema {
            c.batch(stmt).map_err(any)?;
        }
    }
    Ok(())
}

// --- SQLite ------------------------------------------------------------------------------------

pub struct TpccSqlite {
    db: SqliteFile,
}

impl TpccSqlite {
    pub fn open(o: &EngineOptions) -> Result<Self> {
        std::fs::create_dir_all(&o.path)?;
        let db = SqliteFile::new(o.path.join("tpcc.sqlite"), o);
        let c = db.connect()?;
        let exists: bool = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'warehouse'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)?;
        if !exists {
            c.execute_batch(&format!(
                "BEGIN; {}; COMMIT;",
                schema(Dialect::Sqlite, "").join("; ")
            ))?;
        }
        Ok(TpccSqlite { db })
    }
}

impl TpccDb for TpccSqlite {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx::new(SqliteConn::new(self.db.connect()?))))
    }
    fn analyze(&self) -> Result<()> {
        Ok(self.db.connect()?.execute_batch("ANALYZE")?)
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        match mode {
            Mode::Procedures => {
                anyhow::bail!("SQLite has no stored procedures: use --tpcc-mode statements or rows")
            }
            _ => Ok(()),
        }
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        let c = self.db.connect()?;
        c.set_prepared_statement_cache_capacity(256);
        match mode {
            Mode::Statements => Ok(Box::new(StmtSession::new(SqliteConn::new(c)))),
            Mode::Rows => Ok(Box::new(RowSession(Box::new(SqlTx::new(SqliteConn::new(
                c,
            )))))),
            Mode::Procedures => anyhow::bail!("SQLite has no stored procedures"),
        }
    }
}

// --- the servers: MariaDB and PostgreSQL ------------------------------------------------------

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    MariaDb,
    Postgres,
}

/// A database on a server alloclab started: the two servers differ only in their connections,
/// how their schema is found, their procedures and their statistics, each a `match` below.
pub struct TpccServer {
    kind: Kind,
    server: Server,
}

impl TpccServer {
    pub fn open(kind: Kind, server: Server) -> Result<Self> {
        let db = TpccServer { kind, server };
        match kind {
            Kind::MariaDb => {
                let schema = schema(Dialect::MariaDb, &db.server.table_engine);
                create_schema(&mut db.maria()?, "SHOW TABLES LIKE 'warehouse'", &schema)?
            }
            Kind::Postgres => {
                let probe = "SELECT 1 FROM pg_tables WHERE tablename = 'warehouse'";
                create_schema(&mut db.pg()?, probe, &schema(Dialect::Postgres, ""))?
            }
        }
        Ok(db)
    }

    fn maria(&self) -> Result<MariaConn> {
        MariaConn::connect(&self.server)
    }

    fn pg(&self) -> Result<PgConn> {
        PgConn::connect(&self.server)
    }
}

impl TpccDb for TpccServer {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(match self.kind {
            Kind::MariaDb => Box::new(SqlTx::new(self.maria()?)),
            Kind::Postgres => Box::new(SqlTx::new(self.pg()?)),
        })
    }
    fn analyze(&self) -> Result<()> {
        match self.kind {
            Kind::MariaDb => {
                let sql = format!("ANALYZE TABLE {}", tables().join(", "));
                self.maria()?.query(&sql, &[]).map_err(any)?;
                Ok(())
            }
            Kind::Postgres => self.pg()?.batch("ANALYZE").map_err(any),
        }
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        match (mode, self.kind) {
            (Mode::Procedures, Kind::MariaDb) => {
                procs::create_mariadb(&mut self.maria()?.0, &self.server)
            }
            (Mode::Procedures, Kind::Postgres) => {
                procs::create_postgres(&mut self.pg()?.c, &self.server)
            }
            _ => Ok(()),
        }
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        let server = &self.server;
        Ok(match (mode, self.kind) {
            (Mode::Procedures, Kind::MariaDb) => Box::new(MariaProcs::new(self.maria()?.0)?),
            (Mode::Procedures, Kind::Postgres) => Box::new(PgProcs::new(self.pg()?.c)?),
            (Mode::Statements, Kind::MariaDb) => {
                Box::new(StmtSession::new(mariadb_statements(server)?))
            }
            (Mode::Statements, Kind::Postgres) => {
                Box::new(StmtSession::new(postgres_statements(server)?))
            }
            (Mode::Rows, _) => Box::new(RowSession(self.session()?)),
        })
    }
    fn transaction_counter(&self) -> Result<Option<u64>> {
        Ok(match self.kind {
            Kind::MariaDb => {
                let sql =
                    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')";
                let rows = self.maria()?.query(sql, &[]).map_err(any)?;
                Some(rows.iter().map(|r| r[1].i() as u64).sum())
            }
            Kind::Postgres => {
                let sql = "SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::bigint FROM pg_stat_database";
                let rows = self.pg()?.query(sql, &[]).map_err(any)?;
                rows.first().map(|r| r[0].i() as u64)
            }
        })
    }
}
