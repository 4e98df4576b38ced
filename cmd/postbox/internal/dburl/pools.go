package dburl

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store/postgres"
)

// Pools opens the databases of many sources (postgres relay --sources):
// one pool per PostgreSQL URL and one listening connection
// (postgres.Listener), shared by the stores of all its schemas, so that N
// schemas in D databases take D pools and D listening connections, not
// N. A SQLite URL is opened on its own (Open). It is safe for concurrent
// use.
type Pools struct {
	opt      Options
	maxConns int32

	mu   sync.Mutex
	open map[string]*sharedPool
}

// sharedPool is one database's pool, its listening connection, and how
// many stores use them.
type sharedPool struct {
	pool     *pgxpool.Pool
	listener *postgres.Listener
	close    func()
	refs     int
}

// NewPools returns Pools whose pools have at most maxConns connections
// each (0: the URL's pool_max_conns, or pgx's default), named
// opt.ApplicationName; opt.Schema is unused (each Open names its schema).
func NewPools(opt Options, maxConns int32) *Pools {
	return &Pools{opt: opt, maxConns: maxConns, open: map[string]*sharedPool{}}
}

// Open returns the store of schema in the database of url, on the pool
// the other schemas of url share; its Close releases the pool, which is
// closed with the last of its stores.
func (p *Pools) Open(ctx context.Context, url, schema string) (*DB, error) {
	if !IsPostgres(url) {
		opt := p.opt
		opt.Schema = schema
		return Open(ctx, url, opt)
	}
	sp, err := p.acquire(ctx, url)
	if err != nil {
		return nil, Scrub(err, url)
	}
	release := func() { p.release(url, sp) }
	s, err := postgres.New(sp.pool, postgres.Config{Schema: schema, Listener: sp.listener})
	if err != nil {
		release()
		return nil, err
	}
	d := s.Driver()
	var once sync.Once
	return &DB{Outbox: d, Endpoints: d, Presence: d, Console: s, migrate: s.Migrate, postgres: s,
		close: func() { once.Do(release) }}, nil
}

// acquire returns the pool of url, opening it (and pinging the database)
// when no store uses it yet.
func (p *Pools) acquire(ctx context.Context, url string) (*sharedPool, error) {
	p.mu.Lock()
	if sp, ok := p.open[url]; ok {
		sp.refs++
		p.mu.Unlock()
		return sp, nil
	}
	p.mu.Unlock()
	// Opened outside the lock: one unreachable database must not hold up
	// the others' sources. Two sources of one new database may both open
	// it; the second keeps the first's pool and closes its own.
	pool, closePool, err := openPool(ctx, url, p.opt.ApplicationName, p.maxConns)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp, ok := p.open[url]; ok {
		sp.refs++
		go closePool()
		return sp, nil
	}
	l := postgres.NewListener(pool)
	sp := &sharedPool{pool: pool, listener: l, refs: 1, close: func() {
		l.Close() // the stores' relays have stopped
		closePool()
	}}
	p.open[url] = sp
	return sp, nil
}

// release drops one store's use of sp, closing it with the last.
func (p *Pools) release(url string, sp *sharedPool) {
	p.mu.Lock()
	sp.refs--
	last := sp.refs == 0
	if last && p.open[url] == sp {
		delete(p.open, url)
	}
	p.mu.Unlock()
	if last {
		sp.close()
	}
}

// Databases is how many PostgreSQL pools are open.
func (p *Pools) Databases() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}
