//! TPC-C on the SQL engines: SQLite (a file of this process), MariaDB and PostgreSQL (servers
//! alloclab started). Each opens its database (creating the `schema` where it is missing) and
//! gives sessions in every mode it runs: rows (`sql_tx`), statements (`stmts`) and, on the
//! servers, procedures (`procs`). The connections, and which client library each mode goes
//! through, are `crate::sql`'s.

use anyhow::Result;

use super::schema::{schema, tables};
use super::sql_tx::SqlTx;
use super::transactions::RowSession;
use super::{procs, stmts, Mode, TpccDb, TpccTx, TxnSession};
use crate::engines::sqlite::SqliteFile;
use crate::engines::EngineOptions;
use crate::sql::mariadb::MariaConn;
use crate::sql::postgres::PgConn;
use crate::sql::sqlite::SqliteConn;
use crate::sql::{Dialect, Server, SqlConn};

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
            Mode::Statements => Ok(Box::new(stmts::StmtSession::new(SqliteConn::new(c)))),
            Mode::Rows => Ok(Box::new(RowSession(Box::new(SqlTx::new(SqliteConn::new(
                c,
            )))))),
            Mode::Procedures => anyhow::bail!("SQLite has no stored procedures"),
        }
    }
}

// --- MariaDB ---------------------------------------------------------------------------------

pub struct TpccMariaDb {
    server: Server,
}

impl TpccMariaDb {
    pub fn open(server: Server) -> Result<Self> {
        let db = TpccMariaDb { server };
        let mut c = db.connect()?;
        let tables = c
            .query("SHOW TABLES LIKE 'warehouse'", &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if tables.is_empty() {
            for stmt in schema(Dialect::MariaDb, &db.server.table_engine) {
                c.batch(&stmt).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Ok(db)
    }

    fn connect(&self) -> Result<MariaConn> {
        MariaConn::connect(&self.server)
    }
}

impl TpccDb for TpccMariaDb {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx::new(self.connect()?)))
    }
    fn analyze(&self) -> Result<()> {
        let mut c = self.connect()?;
        c.query(&format!("ANALYZE TABLE {}", tables().join(", ")), &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        if mode == Mode::Procedures {
            procs::create_mariadb(&mut self.connect()?.0, &self.server)?;
        }
        Ok(())
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        match mode {
            Mode::Procedures => Ok(Box::new(procs::MariaProcs::new(self.connect()?.0)?)),
            Mode::Statements => Ok(Box::new(stmts::StmtSession::new(
                crate::sql::mariadb_statements(&self.server)?,
            ))),
            Mode::Rows => Ok(Box::new(RowSession(self.session()?))),
        }
    }
    fn transaction_counter(&self) -> Result<Option<u64>> {
        let mut c = self.connect()?;
        let rows = c
            .query(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')",
                &[],
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Some(rows.iter().map(|r| r[1].i() as u64).sum()))
    }
}

// --- PostgreSQL ------------------------------------------------------------------------------

pub struct TpccPostgres {
    server: Server,
}

impl TpccPostgres {
    pub fn open(server: Server) -> Result<Self> {
        let db = TpccPostgres { server };
        let mut c = db.connect()?;
        let tables = c
            .query("SELECT 1 FROM pg_tables WHERE tablename = 'warehouse'", &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if tables.is_empty() {
            for stmt in schema(Dialect::Postgres, "") {
                c.batch(&stmt).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Ok(db)
    }

    fn connect(&self) -> Result<PgConn> {
        PgConn::connect(&self.server)
    }
}

impl TpccDb for TpccPostgres {
    fn session(&self) -> Result<Box<dyn TpccTx + '_>> {
        Ok(Box::new(SqlTx::new(self.connect()?)))
    }
    fn analyze(&self) -> Result<()> {
        self.connect()?
            .batch("ANALYZE")
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
    fn prepare_mode(&self, mode: Mode) -> Result<()> {
        if mode == Mode::Procedures {
            procs::create_postgres(&mut self.connect()?.c, &self.server)?;
        }
        Ok(())
    }
    fn terminal(&self, mode: Mode) -> Result<Box<dyn TxnSession + '_>> {
        match mode {
            Mode::Procedures => Ok(Box::new(procs::PgProcs::new(self.connect()?.c)?)),
            Mode::Statements => Ok(Box::new(stmts::StmtSession::new(
                crate::sql::postgres_statements(&self.server)?,
            ))),
            Mode::Rows => Ok(Box::new(RowSession(self.session()?))),
        }
    }
    fn transaction_counter(&self) -> Result<Option<u64>> {
        let mut c = self.connect()?;
        let rows = c
            .query("SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::bigint FROM pg_stat_database", &[])
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(rows.first().map(|r| r[0].i() as u64))
    }
}
