// Command benchnllb compares, on loopback, a direct TCP connection to an
// upstream with the same connection through the NLLB balancer (in its own
// process, as it runs on a node) and through HAProxy in TCP mode (Debian's
// haproxy, when installed): bulk throughput of one connection, and the
// p50/p99 round-trip time of small request/response exchanges over 1 and
// 64 concurrent connections. The paths are interleaved round by round, so
// a busy machine slows them alike; medians of the rounds are printed.
//
// Run it with `make bench-nllb`.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/herald-lb/herald/internal/cputime"
	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/health"
)

func main() {
	role := flag.String("role", "bench", "bench, or nllb (the balancer child process; internal)")
	var pairs multiFlag
	flag.Var(&pairs, "pair", "nllb role: LISTEN=UPSTREAM, repeatable (internal)")
	rounds := flag.Int("rounds", 3, "rounds; every path is measured once per round")
	bulkMiB := flag.Int("bulk-mib", 1024, "MiB sent over one connection per bulk run")
	latDur := flag.Duration("latency-duration", 2*time.Second, "length of one latency run")
	msg := flag.Int("msg", 64, "request and response size in bytes for the latency runs")
	haproxyBin := flag.String("haproxy", "haproxy", "haproxy binary (skipped when not found)")
	flag.Parse()
	var err error
	if *role == "nllb" {
		err = serveNLLB(pairs)
	} else {
		err = bench(*rounds, int64(*bulkMiB)<<20, *latDur, *msg, *haproxyBin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchnllb:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// serveNLLB runs one balancer per LISTEN=UPSTREAM pair until SIGTERM.
func serveNLLB(pairs []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var wg sync.WaitGroup
	errs := make(chan error, len(pairs))
	for _, p := range pairs {
		l, u, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("pair %q: want LISTEN=UPSTREAM", p)
		}
		la, err := netip.ParseAddrPort(l)
		if err != nil {
			return fmt.Errorf("pair %q: %w", p, err)
		}
		ua, err := netip.ParseAddrPort(u)
		if err != nil {
			return fmt.Errorf("pair %q: %w", p, err)
		}
		b, err := nllb.Listen(nllb.Config{Name: l, Listen: la, Upstreams: []netip.AddrPort{ua}, Logger: log,
			Health: health.Options{Prober: health.TCPProber{}, Thresholds: health.DefaultThresholds()}})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.Serve(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// path is one way from the client to the upstreams.
type path struct {
	name       string
	bulk, echo string // addresses the client dials
	pid        int    // the proxy's process, 0 for direct
}

func bench(rounds int, bulkBytes int64, latDur time.Duration, msg int, haproxyBin string) error {
	sink, err := serve(sinkConn)
	if err != nil {
		return err
	}
	echo, err := serve(func(c *net.TCPConn) { echoConn(c, msg) })
	if err != nil {
		return err
	}
	paths := []path{{name: "direct", bulk: sink, echo: echo}}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	nb, ne := freePort(), freePort()
	child := exec.Command(self, "-role", "nllb", "-pair", nb+"="+sink, "-pair", ne+"="+echo)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return fmt.Errorf("start the nllb process: %w", err)
	}
	defer stopProcess(child)
	paths = append(paths, path{name: "nllb", bulk: nb, echo: ne, pid: child.Process.Pid})

	haproxyVersion := ""
	if bin, err := exec.LookPath(haproxyBin); err != nil {
		fmt.Fprintf(os.Stderr, "benchnllb: %s not found (apt-get install haproxy): HAProxy skipped\n", haproxyBin)
	} else {
		out, _ := exec.Command(bin, "-v").Output()
		haproxyVersion, _, _ = strings.Cut(string(out), "\n")
		dir, err := os.MkdirTemp("", "benchnllb-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		for _, splice := range []bool{false, true} {
			hb, he := freePort(), freePort()
			name := "haproxy"
			opt := ""
			if splice {
				name, opt = "haproxy splice-auto", "    option splice-auto\n"
			}
			cfg := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".cfg")
			if err := os.WriteFile(cfg, []byte(haproxyConfig(hb, sink, he, echo, opt)), 0o600); err != nil {
				return err
			}
			cmd := exec.Command(bin, "-db", "-f", cfg)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				return fmt.Errorf("start %s: %w", name, err)
			}
			defer stopProcess(cmd)
			paths = append(paths, path{name: name, bulk: hb, echo: he, pid: cmd.Process.Pid})
		}
	}
	for _, p := range paths {
		for _, a := range []string{p.bulk, p.echo} {
			if err := waitListening(a); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("benchnllb: %s, GOMAXPROCS %d, %d CPUs, load average %s", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), string(load))
	if haproxyVersion != "" {
		fmt.Printf("benchnllb: %s (nbthread default)\n", haproxyVersion)
	}
	fmt.Printf("benchnllb: %d rounds; bulk %d MiB per run; latency runs of %v with %d-byte messages\n\n", rounds, bulkBytes>>20, latDur, msg)

	type bulkResult struct{ mibs, cpuPerGiB, selfPerGiB []float64 }
	bulk := make([]bulkResult, len(paths))
	lat := map[[2]int][]time.Duration{}     // [path, concurrency] -> samples
	byRound := map[[3]int][]time.Duration{} // [path, concurrency, round] -> samples
	concs := []int{1, 64}
	for r := range rounds {
		for i, p := range paths {
			cpu0, self0 := procCPU(p.pid), cputime.Process()
			mibs, err := runBulk(p.bulk, bulkBytes)
			if err != nil {
				return fmt.Errorf("round %d, %s bulk: %w", r+1, p.name, err)
			}
			cpu, self := procCPU(p.pid)-cpu0, cputime.Process()-self0
			gib := float64(bulkBytes) / (1 << 30)
			bulk[i].mibs = append(bulk[i].mibs, mibs)
			bulk[i].cpuPerGiB = append(bulk[i].cpuPerGiB, cpu.Seconds()/gib)
			bulk[i].selfPerGiB = append(bulk[i].selfPerGiB, self.Seconds()/gib)
			fmt.Fprintf(os.Stderr, "round %d: %-20s bulk %8.0f MiB/s, proxy CPU %.2f s/GiB, client+server CPU %.2f s/GiB\n",
				r+1, p.name, mibs, bulk[i].cpuPerGiB[r], bulk[i].selfPerGiB[r])
		}
		for _, c := range concs {
			for i, p := range paths {
				s, err := runLatency(p.echo, c, latDur, msg)
				if err != nil {
					return fmt.Errorf("round %d, %s latency with %d connections: %w", r+1, p.name, c, err)
				}
				lat[[2]int{i, c}] = append(lat[[2]int{i, c}], s...)
				byRound[[3]int{i, c, r}] = s
				fmt.Fprintf(os.Stderr, "round %d: %-20s %2d conns: %d round trips\n", r+1, p.name, c, len(s))
			}
		}
	}

	fmt.Println("Bulk: one connection sending", bulkBytes>>20, "MiB to a sink that confirms the count.")
	fmt.Println()
	fmt.Println("| path | MiB/s, median (min–max) | of direct: ratio of medians; median of per-round ratios (range) | proxy CPU s/GiB | client+server CPU s/GiB |")
	fmt.Println("|---|---|---|---|---|")
	for i, p := range paths {
		m := median(bulk[i].mibs)
		ratio, cpu := "", "—"
		if i > 0 {
			var rs []float64
			for r := range bulk[i].mibs {
				rs = append(rs, 100*bulk[i].mibs[r]/bulk[0].mibs[r])
			}
			ratio = fmt.Sprintf("%.0f %%; %.0f %% (%.0f–%.0f %%)", 100*m/median(bulk[0].mibs), median(rs), slices.Min(rs), slices.Max(rs))
			cpu = fmt.Sprintf("%.2f", median(bulk[i].cpuPerGiB))
		}
		fmt.Printf("| %s | %.0f (%.0f–%.0f) | %s | %s | %.2f |\n", p.name, m, slices.Min(bulk[i].mibs), slices.Max(bulk[i].mibs), ratio, cpu, median(bulk[i].selfPerGiB))
	}
	fmt.Println()
	fmt.Printf("Round trips: %d-byte request, %d-byte answer, back to back on each connection; percentiles over all rounds'\n", msg, msg)
	fmt.Println("samples; added = path minus direct, pooled and as the median of the per-round differences.")
	fmt.Println()
	fmt.Println("| path | connections | p50 µs | p99 µs | added p50 / p99 µs, pooled | added p50 / p99 µs, median of rounds | round trips/s |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, c := range concs {
		for i, p := range paths {
			all := lat[[2]int{i, c}]
			p50, p99 := percentile(all, 0.50), percentile(all, 0.99)
			added, addedRounds := "—", "—"
			if i > 0 {
				d0 := lat[[2]int{0, c}]
				added = fmt.Sprintf("%s / %s", us(p50-percentile(d0, 0.50)), us(p99-percentile(d0, 0.99)))
				var d50, d99 []float64
				for r := range rounds {
					mine, dir := byRound[[3]int{i, c, r}], byRound[[3]int{0, c, r}]
					d50 = append(d50, float64(percentile(mine, 0.50)-percentile(dir, 0.50)))
					d99 = append(d99, float64(percentile(mine, 0.99)-percentile(dir, 0.99)))
				}
				addedRounds = fmt.Sprintf("%s / %s", us(time.Duration(median(d50))), us(time.Duration(median(d99))))
			}
			rate := float64(len(all)) / (latDur.Seconds() * float64(rounds))
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %.0f |\n", p.name, c, us(p50), us(p99), added, addedRounds, rate)
		}
	}
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

func haproxyConfig(bulkListen, bulkUp, echoListen, echoUp, opt string) string {
	return fmt.Sprintf(`global
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 5m
    timeout server 5m
%sfrontend bulk
    bind %s
    default_backend bulk
backend bulk
    server s1 %s
frontend echo
    bind %s
    default_backend echo
backend echo
    server s1 %s
`, opt, bulkListen, bulkUp, echoListen, echoUp)
}

// serve accepts on a free loopback port and runs h per connection.
func serve(h func(*net.TCPConn)) (string, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return "", err
	}
	go func() {
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				h(c)
			}()
		}
	}()
	return ln.Addr().String(), nil
}

// sinkConn reads until EOF and answers with the byte count.
func sinkConn(c *net.TCPConn) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := c.Read(buf)
		n += int64(k)
		if err != nil {
			break
		}
	}
	binary.Write(c, binary.BigEndian, n)
}

// echoConn answers every msg-byte request with msg bytes.
func echoConn(c *net.TCPConn, msg int) {
	buf := make([]byte, msg)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

func runBulk(addr string, total int64) (float64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	buf := make([]byte, 256<<10)
	start := time.Now()
	for sent := int64(0); sent < total; {
		k := min(int64(len(buf)), total-sent)
		n, err := c.Write(buf[:k])
		sent += int64(n)
		if err != nil {
			return 0, err
		}
	}
	c.(*net.TCPConn).CloseWrite()
	var got int64
	if err := binary.Read(c, binary.BigEndian, &got); err != nil {
		return 0, fmt.Errorf("reading the sink's count: %w", err)
	}
	el := time.Since(start)
	if got != total {
		return 0, fmt.Errorf("sink received %d bytes, want %d", got, total)
	}
	return float64(total) / (1 << 20) / el.Seconds(), nil
}

func runLatency(addr string, conns int, d time.Duration, msg int) ([]time.Duration, error) {
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(d + time.Minute))
		cs[i] = c
	}
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	end := time.Now().Add(d + 100*time.Millisecond)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := make([]byte, msg), make([]byte, msg)
			r := bufio.NewReaderSize(c, msg)
			// One warm-up exchange: connection setup (and the proxy's
			// upstream dial) is not part of the round trip.
			_, err := c.Write(req)
			if err == nil {
				_, err = io.ReadFull(r, resp)
			}
			<-start
			s := make([]time.Duration, 0, 1<<14)
			for err == nil && time.Now().Before(end) {
				t0 := time.Now()
				if _, err = c.Write(req); err != nil {
					break
				}
				if _, err = io.ReadFull(r, resp); err != nil {
					break
				}
				s = append(s, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, s...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(start)
	wg.Wait()
	return all, firstErr
}

func percentile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[max(i, 0)]
}

func median(v []float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopProcess(c *exec.Cmd) {
	c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.Process.Kill()
		<-done
	}
}

// procCPU is the user+system CPU time of process pid (its threads
// included), from /proc; 0 for pid 0.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck
}
