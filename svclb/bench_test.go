package svclb

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/netnstest"
)

// BenchmarkForward compares one client's TCP throughput and round-trip
// time through the pod: routed without NAT ("direct"), through the
// nftables rules, and through the userspace proxy. The forwarders' source
// ports differ from the backend's, so the direct path crosses the same
// (non-matching) rules and conntrack. Run it with `make bench-svclb`.
func BenchmarkForward(b *testing.B) {
	netnstest.RequireRoot(b)
	tp := newTopo(b, true)
	// path name -> client port for the sink (throughput) and the echo (latency)
	type ports struct{ sink, echo int }
	paths := []struct {
		name string
		dst  string
		p    ports
	}{
		{"direct", "10.0.2.2", ports{9000, 8080}},
		{"nftables", "10.0.1.1", ports{80, 81}},
		{"userspace", "10.0.1.1", ports{90, 91}},
	}
	probe := 10910
	for _, p := range paths[1:] {
		for _, fw := range []struct{ src, dst int }{{p.p.sink, 9000}, {p.p.echo, 8080}} {
			probe++
			f, ok := startForwarder(b, tp.pod, "HERALD_SVCLB_MODE="+p.name, "SRC_PORT="+strconv.Itoa(fw.src), "DEST_PROTO=TCP",
				"DEST_PORT="+strconv.Itoa(fw.dst), "DEST_IPS=10.0.2.2", "HERALD_SVCLB_PROBE_PORT="+strconv.Itoa(probe))
			if !ok {
				b.Fatalf("%s forwarder exited with %d:\n%s", p.name, f.code, f.stderr)
			}
		}
	}

	for _, p := range paths {
		b.Run("throughput/"+p.name, func(b *testing.B) {
			c, err := tp.dial("tcp", "10.0.1.2", net.JoinHostPort(p.dst, strconv.Itoa(p.p.sink)), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			// Count only what arrived: the sink answers with its byte count.
			c.(*net.TCPConn).CloseWrite()
			line, err := bufio.NewReader(c).ReadString('\n')
			b.StopTimer()
			if n, _ := strconv.Atoi(strings.TrimSpace(line)); err != nil || n != b.N*len(buf) {
				b.Fatalf("sink got %q (%v), want %d bytes", line, err, b.N*len(buf))
			}
			b.ReportMetric(float64(b.N*len(buf))*8/b.Elapsed().Seconds()/1e9, "Gbit/s")
		})
	}
	for _, p := range paths {
		b.Run("latency/"+p.name, func(b *testing.B) {
			c, err := tp.dial("tcp", "10.0.1.2", net.JoinHostPort(p.dst, strconv.Itoa(p.p.echo)), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetNoDelay(true)
			r := bufio.NewReader(c)
			if _, err := r.ReadString('\n'); err != nil { // the greeting
				b.Fatal(err)
			}
			one := []byte{'x'}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(one); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(r, one); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/rtt")
		})
	}
}
