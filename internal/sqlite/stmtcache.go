package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"

	msqlite "modernc.org/sqlite"
)

// The store runs a few dozen distinct statements millions of times; compiling each again on
// every call was about a sixth of the local runtime's CPU under a stream of single sends. The
// "herald-sqlite" driver wraps the pure-Go driver with a per-connection cache of prepared
// statements keyed by their text: database/sql prepares, runs and closes a statement for every
// query, and a cached one is reset for the next use instead of being finalized. A statement
// still in use on its connection (its rows open while the same text runs again) is prepared
// afresh and finalized as usual, so nothing is shared while it runs.

const cachingDriverName = "herald-sqlite"

// maxCachedStatements bounds a connection's cache; statements beyond it are finalized after use.
const maxCachedStatements = 256

func init() { sql.Register(cachingDriverName, cachingDriver{}) }

type cachingDriver struct{}

func (cachingDriver) Open(dsn string) (driver.Conn, error) {
	c, err := (&msqlite.Driver{}).Open(dsn)
	if err != nil {
		return nil, err
	}
	return &cachingConn{base: c, stmts: map[string]*cachedStmt{}}, nil
}

// cachingConn is a driver connection that hides the base's direct Exec and Query, so
// database/sql goes through PrepareContext, which the cache answers.
type cachingConn struct {
	base  driver.Conn
	mu    sync.Mutex
	stmts map[string]*cachedStmt
}

type cachedStmt struct {
	driver.Stmt
	conn  *cachingConn
	inUse bool
	cache bool // false: finalized on Close
}

var (
	_ driver.ConnPrepareContext = (*cachingConn)(nil)
	_ driver.ConnBeginTx        = (*cachingConn)(nil)
	_ driver.NamedValueChecker  = (*cachingConn)(nil)
	_ driver.SessionResetter    = (*cachingConn)(nil)
	_ driver.Validator          = (*cachingConn)(nil)
	_ driver.Pinger             = (*cachingConn)(nil)
	_ driver.StmtExecContext    = (*cachedStmt)(nil)
	_ driver.StmtQueryContext   = (*cachedStmt)(nil)
)

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.mu.Lock()
	if s, ok := c.stmts[query]; ok && !s.inUse {
		s.inUse = true
		c.mu.Unlock()
		return s, nil
	}
	_, taken := c.stmts[query]
	full := len(c.stmts) >= maxCachedStatements
	c.mu.Unlock()
	st, err := c.base.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s := &cachedStmt{Stmt: st, conn: c, inUse: true, cache: !taken && !full}
	if s.cache {
		c.mu.Lock()
		c.stmts[query] = s
		c.mu.Unlock()
	}
	return s, nil
}

// Close of a cached statement hands it back for the next use.
func (s *cachedStmt) Close() error {
	if !s.cache {
		return s.Stmt.Close()
	}
	s.conn.mu.Lock()
	s.inUse = false
	s.conn.mu.Unlock()
	return nil
}

func (s *cachedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *cachedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (c *cachingConn) Close() error {
	c.mu.Lock()
	stmts := c.stmts
	c.stmts = map[string]*cachedStmt{}
	c.mu.Unlock()
	var errs []error
	for _, s := range stmts {
		errs = append(errs, s.Stmt.Close())
	}
	errs = append(errs, c.base.Close())
	return errors.Join(errs...)
}

func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.base.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *cachingConn) CheckNamedValue(v *driver.NamedValue) error {
	if ch, ok := c.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *cachingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.base.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *cachingConn) IsValid() bool {
	if v, ok := c.base.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *cachingConn) Ping(ctx context.Context) error {
	if p, ok := c.base.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}
