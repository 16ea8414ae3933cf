// monthfill: the 30-day state of Herald's growing buckets in a nats-server, at
// their current limits (pkg/bus/bus.go), then the soak's rate against it.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	url    = flag.String("url", "nats://127.0.0.1:24222", "")
	prof   = flag.String("prof", "127.0.0.1:24642", "")
	pidf   = flag.Int("pid", 0, "nats-server pid")
	scale  = flag.Float64("scale", 1, "fraction of the 30-day key counts")
	steady = flag.Duration("steady", 3*time.Minute, "soak-rate writes after the fill")
	only   = flag.String("only", "", "measure only")
	skip   = flag.Bool("skipfill", false, "steady only, against a filled store")
)

type bk struct {
	name   string
	ttl    time.Duration
	max    int64
	bytes  int64
	keys   int // 30-day keys
	prefix string
	val    [2]int // value sizes of the two revisions (0: one revision)
}

var bks = []bk{
	{"herald_deliveries", 30 * 24 * time.Hour, 5_000_000, 2560 << 20, 5_000_000, "health.", [2]int{331, 400}},
	{"herald_requests", 30 * 24 * time.Hour, 1_000_000, 768 << 20, 1_000_000, "health.", [2]int{580, 0}},
	{"herald_seen", 48 * time.Hour, 1_000_000, 256 << 20, 864_000, "tg_main.", [2]int{53, 0}},
}

func key(b bk, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", b.name, i)))
	switch b.name {
	case "herald_deliveries":
		return b.prefix + hex.EncodeToString(h[:])
	case "herald_requests": // a UUIDv7-like id, every other one _routed.
		s := hex.EncodeToString(h[:16])
		id := s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
		if i%2 == 1 {
			return "_routed.health." + id
		}
		return b.prefix + id
	default:
		return b.prefix + hex.EncodeToString(h[:16])
	}
}

var memRe = regexp.MustCompile(`# (HeapAlloc|HeapInuse|HeapIdle|HeapReleased|HeapSys|Sys) = (\d+)`)

func measure(label string, gc bool) {
	q := "?debug=1"
	if gc {
		q += "&gc=1"
	}
	resp, err := http.Get("http://" + *prof + "/debug/pprof/heap" + q)
	m := map[string]float64{}
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, s := range memRe.FindAllStringSubmatch(string(b), -1) {
			var v float64
			fmt.Sscan(s[2], &v)
			m[s[1]] = v / (1 << 20)
		}
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", *pidf))
	var rss, anon string
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "VmRSS:" {
			rss = f[1]
		} else if len(f) > 1 && f[0] == "RssAnon:" {
			anon = f[1]
		}
	}
	var r, a float64
	fmt.Sscan(rss, &r)
	fmt.Sscan(anon, &a)
	fmt.Printf("%s %-28s rss=%6.0f anon=%6.0f live/alloc=%6.0f inuse=%6.0f idle-rel=%6.0f released=%6.0f sys=%6.0f MiB\n", time.Now().Format("15:04:05"), label,
		r/1024, a/1024, m["HeapAlloc"], m["HeapInuse"], m["HeapIdle"]-m["HeapReleased"], m["HeapReleased"], m["Sys"])
}

func saveProfile(name string) {
	resp, err := http.Get("http://" + *prof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	f, _ := os.Create(name)
	io.Copy(f, resp.Body)
	f.Close()
}

func main() {
	flag.Parse()
	if *only != "" {
		measure(*only, false)
		measure(*only+" (after GC)", true)
		saveProfile(*only + ".pb.gz")
		return
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		panic(err)
	}
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	ctx := context.Background()
	for _, b := range bks {
		if *skip {
			break
		}
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.name, Storage: jetstream.FileStorage, TTL: b.ttl, History: 1, MaxBytes: b.bytes})
		if err != nil {
			panic(err)
		}
		_ = kv
		s, _ := js.Stream(ctx, "KV_"+b.name)
		info, _ := s.Info(ctx)
		cfg := info.Config
		cfg.MaxMsgs, cfg.Discard = b.max, jetstream.DiscardOld
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			panic(err)
		}
	}
	if !*skip {
		measure("empty", true)
	}
	pad := strings.Repeat("x", 600)
	var pending int
	pub := func(subj string, n int) {
		if _, err := js.PublishAsync(subj, []byte(pad[:n])); err != nil {
			panic(err)
		}
		pending++
		if pending%20000 == 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(60 * time.Second):
				panic("stalled")
			}
		}
	}
	// Fill, interleaved by share, a milestone every 10% of the ledger.
	n := make([]int, len(bks))
	for j, b := range bks {
		n[j] = int(float64(b.keys) * *scale)
	}
	next := make([]int, len(bks))
	start := time.Now()
	if *skip {
		next = []int{7_000_000, 2_000_000, 2_000_000}
		n[0] = 0
	}
	for s := 1; s <= n[0]; s++ {
		for j, b := range bks {
			for next[j] < s*n[j]/n[0] {
				i := next[j]
				pub("$KV."+b.name+"."+key(b, i), b.val[0])
				if b.val[1] > 0 && i >= 100 { // the second revision, 100 records later
					pub("$KV."+b.name+"."+key(b, i-100), b.val[1])
				}
				next[j]++
			}
		}
		if s%(n[0]/10) == 0 {
			<-js.PublishAsyncComplete()
			measure(fmt.Sprintf("fill %d%% (%d keys, %s)", 100*s/n[0], next[0]+next[1]+next[2], time.Since(start).Round(time.Second)), false)
			measure("  after GC", true)
		}
	}
	<-js.PublishAsyncComplete()
	measure("filled", false)
	measure("filled (after GC)", true)
	saveProfile("filled.pb.gz")
	// The soak's rate against full buckets: 100 ledger writes/s (50 keys),
	// 10 requests/s, 5 seen/s; each bucket at its cap drops its oldest.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(*steady)
	lastM := time.Now()
	for now := range t.C {
		if now.After(end) {
			break
		}
		for k := 0; k < 5; k++ {
			i := next[0]
			pub("$KV.herald_deliveries."+key(bks[0], i), 331)
			pub("$KV.herald_deliveries."+key(bks[0], i-100), 400)
			next[0]++
		}
		pub("$KV.herald_requests."+key(bks[1], next[1]), 580)
		next[1]++
		if now.UnixMilli()/100%2 == 0 {
			pub("$KV.herald_seen."+key(bks[2], next[2]), 53)
			next[2]++
		}
		if time.Since(lastM) > 30*time.Second {
			measure("steady", false)
			lastM = time.Now()
		}
	}
	<-js.PublishAsyncComplete()
	measure("steady end", false)
	measure("steady end (after GC)", true)
	saveProfile("steady.pb.gz")
	for _, b := range bks {
		s, _ := js.Stream(ctx, "KV_"+b.name)
		info, _ := s.Info(ctx)
		fmt.Printf("%s msgs=%d bytes=%dMiB subjects=%d deleted=%d\n", b.name, info.State.Msgs, info.State.Bytes>>20, info.State.NumSubjects, info.State.NumDeleted)
	}
}
