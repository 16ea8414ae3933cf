// Package token mints, checks and revokes the bearer tokens an MCP client
// presents to a butler (architecture.md §9: `herald token mint --butler NAME [--ttl D]`,
// `herald token revoke ID`).
//
// A minted token reads hrt_<id>_<secret>: the id (16 hex digits) names it, so
// a butler can look it up and `herald token revoke` can take it; the secret is
// 32 random bytes, base64url. Only a SHA-256 hash of the whole token is kept,
// in the herald_tokens bucket under "<butler>.<id>", so NATS permissions can
// let a butler read its own keys and no other butler's. Revoking deletes the
// key. A token is good for the butler it was minted for and no other: the
// butler's identity comes from the token, never from what a client says.
//
// The operator's commands bind the bucket (Store: mint, list, revoke); a
// butler only reads its own keys by their subjects (Verifier over a
// bus.DirectKV), so it needs no right to list the bucket.
package token

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
)

// Prefix starts every minted token; StaticPrefix every token NewStatic makes.
// Both make a leaked token easy to recognise (secret scanners, logs).
const (
	Prefix       = "hrt_"
	StaticPrefix = "hrs_"
)

// Why a token is refused. Anything else a Store or Verifier returns is the
// store failing, not the token.
var (
	// ErrUnknown: not a token of this butler: malformed, never minted,
	// revoked, or minted for another butler.
	ErrUnknown = errors.New("unknown token")
	// ErrExpired: the token's time is over.
	ErrExpired = errors.New("token expired")
	// ErrInvalid: a bad argument to Mint or Revoke (butler name, TTL, id).
	ErrInvalid = errors.New("invalid token request")
)

// Record is what the store keeps of a minted token: never the token itself.
type Record struct {
	ID     string `json:"id"`
	Butler string `json:"butler"`
	// SHA256 is the hex SHA-256 of the whole token.
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
	// Expires is when the token stops working; zero: never.
	Expires time.Time `json:"expires,omitzero"`
}

// Expired says whether the token's time is over at now.
func (r Record) Expired(now time.Time) bool { return !r.Expires.IsZero() && !now.Before(r.Expires) }

var (
	// Butler names as in the configuration, ASCII only: they become keys.
	butlerPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	idPattern     = regexp.MustCompile(`^[0-9a-f]{16}$`)
	tokenPattern  = regexp.MustCompile(`^hrt_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$`)
)

// ParseID returns the id of a well-formed minted token.
func ParseID(tok string) (id string, ok bool) {
	m := tokenPattern.FindStringSubmatch(tok)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Hash is the hex SHA-256 of a token, as a Record keeps it.
func Hash(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// Equal compares a presented token with an expected one in constant time
// (in their length too: it compares their hashes).
func Equal(presented, want string) bool {
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// NewStatic returns a fresh random token to keep in a butler's static token
// file (what `herald dev` creates for a butler that has none configured).
func NewStatic() string { return StaticPrefix + secret() }

func secret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func key(butler, id string) string { return butler + "." + id }

// Store is the herald_tokens bucket.
type Store struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// Open opens the bucket, which the topology (bus.EnsureTopology) creates.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, bus.BucketTokens)
	if err != nil {
		return nil, fmt.Errorf("token bucket %s: %w", bus.BucketTokens, err)
	}
	return &Store{kv: kv, now: time.Now}, nil
}

// Mint makes a token for butler, good for ttl (0: until revoked), and stores
// its hash. The token is returned once and kept nowhere.
func (s *Store) Mint(ctx context.Context, butler string, ttl time.Duration) (string, Record, error) {
	if !butlerPattern.MatchString(butler) {
		return "", Record{}, fmt.Errorf("%w: butler name %q must match ^[a-z][a-z0-9_-]{0,62}$", ErrInvalid, butler)
	}
	if ttl < 0 {
		return "", Record{}, fmt.Errorf("%w: a TTL must not be negative", ErrInvalid)
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	tok := Prefix + id + "_" + secret()
	now := s.now().UTC()
	rec := Record{ID: id, Butler: butler, SHA256: Hash(tok), Created: now}
	if ttl > 0 {
		rec.Expires = now.Add(ttl)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", Record{}, err
	}
	if _, err := s.kv.Create(ctx, key(butler, id), b); err != nil {
		return "", Record{}, fmt.Errorf("storing token %s: %w", id, err)
	}
	return tok, rec, nil
}

// Getter reads keys of the bucket: a jetstream.KeyValue, or a bus.DirectKV
// for a butler, which may read its own keys and not bind the bucket.
type Getter interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
}

// Get returns the record of butler's token id; ErrUnknown if there is none.
func (s *Store) Get(ctx context.Context, butler, id string) (Record, error) {
	return get(ctx, s.kv, butler, id)
}

func get(ctx context.Context, kv Getter, butler, id string) (Record, error) {
	if !butlerPattern.MatchString(butler) || !idPattern.MatchString(id) {
		return Record{}, ErrUnknown
	}
	e, err := kv.Get(ctx, key(butler, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, ErrUnknown
	}
	if err != nil {
		return Record{}, fmt.Errorf("looking up token %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Butler != butler || rec.ID != id {
		// A record that does not say what its key says is nobody's token.
		return Record{}, ErrUnknown
	}
	return rec, nil
}

// Revoke deletes the token id, whichever butler it was minted for, and
// returns what it was. Butlers stop accepting it within their cache time.
func (s *Store) Revoke(ctx context.Context, id string) (Record, error) {
	if !idPattern.MatchString(id) {
		return Record{}, fmt.Errorf("%w: %q is not a token id (16 hex digits, as herald token mint printed; the id is the part after hrt_)", ErrInvalid, id)
	}
	keys, err := s.keys(ctx, "*."+id)
	if err != nil {
		return Record{}, err
	}
	if len(keys) == 0 {
		return Record{}, fmt.Errorf("%w: no token %s (already revoked?)", ErrUnknown, id)
	}
	var rec Record
	for _, k := range keys {
		butler, _, _ := strings.Cut(k, ".")
		if r, err := s.Get(ctx, butler, id); err == nil {
			rec = r
		}
		if err := s.kv.Delete(ctx, k); err != nil {
			return Record{}, fmt.Errorf("revoking token %s: %w", id, err)
		}
	}
	return rec, nil
}

// List returns the tokens of butler ("" for every butler), oldest first.
func (s *Store) List(ctx context.Context, butler string) ([]Record, error) {
	filter := ">"
	if butler != "" {
		if !butlerPattern.MatchString(butler) {
			return nil, fmt.Errorf("%w: butler name %q must match ^[a-z][a-z0-9_-]{0,62}$", ErrInvalid, butler)
		}
		filter = butler + ".*"
	}
	keys, err := s.keys(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, k := range keys {
		b, id, _ := strings.Cut(k, ".")
		rec, err := s.Get(ctx, b, id)
		if errors.Is(err, ErrUnknown) {
			continue // revoked meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b Record) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (s *Store) keys(ctx context.Context, filter string) ([]string, error) {
	l, err := s.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	defer func() { _ = l.Stop() }()
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

// Verifier checks the tokens presented to one butler. It keeps what it looked
// up for CacheFor, so a request costs a bucket read at most once per token
// and period, and a revoked token stops working within CacheFor.
type Verifier struct {
	kv       Getter
	butler   string
	cacheFor time.Duration
	now      func() time.Time

	mu    sync.Mutex
	cache map[string]cached // by token id
}

type cached struct {
	rec Record
	err error // nil or ErrUnknown
	at  time.Time
}

// maxCached bounds the cache: ids nobody minted, sent by someone guessing,
// must not grow it without end.
const maxCached = 4096

// NewVerifier checks tokens of butler against the herald_tokens bucket read
// through kv, trusting a lookup for cacheFor.
func NewVerifier(kv Getter, butler string, cacheFor time.Duration) *Verifier {
	return &Verifier{kv: kv, butler: butler, cacheFor: cacheFor, now: time.Now, cache: map[string]cached{}}
}

// Verify returns the record of tok if it is a live token of the butler;
// ErrUnknown or ErrExpired if not; another error if the store cannot answer.
func (v *Verifier) Verify(ctx context.Context, tok string) (Record, error) {
	return v.verify(ctx, tok, false)
}

// VerifyNow is Verify without the cache: for checking again a token that
// holds something open, such as a stream.
func (v *Verifier) VerifyNow(ctx context.Context, tok string) (Record, error) {
	return v.verify(ctx, tok, true)
}

func (v *Verifier) verify(ctx context.Context, tok string, fresh bool) (Record, error) {
	id, ok := ParseID(tok)
	if !ok {
		return Record{}, ErrUnknown
	}
	rec, err := v.lookup(ctx, id, fresh)
	if err != nil {
		return Record{}, err
	}
	if subtle.ConstantTimeCompare([]byte(Hash(tok)), []byte(rec.SHA256)) != 1 {
		return Record{}, ErrUnknown
	}
	if rec.Expired(v.now()) {
		return Record{}, ErrExpired
	}
	return rec, nil
}

func (v *Verifier) lookup(ctx context.Context, id string, fresh bool) (Record, error) {
	now := v.now()
	v.mu.Lock()
	c, ok := v.cache[id]
	v.mu.Unlock()
	if ok && !fresh && now.Sub(c.at) < v.cacheFor {
		return c.rec, c.err
	}
	rec, err := get(ctx, v.kv, v.butler, id)
	if err != nil && !errors.Is(err, ErrUnknown) {
		return Record{}, err // the store failing is not an answer to keep
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cache) >= maxCached {
		for k, c := range v.cache {
			if now.Sub(c.at) >= v.cacheFor {
				delete(v.cache, k)
			}
		}
		if len(v.cache) >= maxCached {
			clear(v.cache)
		}
	}
	v.cache[id] = cached{rec: rec, err: err, at: now}
	return rec, err
}
