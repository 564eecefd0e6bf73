package members

// The processes of the memberlist-at-size bench (TestMembersAtSize): this
// test binary re-executed as one member, or as a CPU burner. A member is
// the package's real Members (Start, SetPeers, its rejoin loop, encryption)
// on its own loopback address, in a process of its own, so that it is
// scheduled, and garbage-collected, as a speaker is. It talks to the bench
// over its standard input and output, one line per message:
//
//	in:  P <addr:port>,<addr:port>,...   SetPeers
//	     S                               write a stats line
//	     (end of input: exit)
//	out: R <addr:port>                   started, listening there
//	     J|L <unix ns> <name>            a member alive / gone (left or dead), from the event delegate
//	     S <unix ns> <name>              this member suspects name (its probe got no ack)
//	     M <unix ns> <name> <k>          this member declared name dead: suspicion timeout, k confirmations
//	     F <unix ns> <from>              this member refuted a suspicion of itself
//	     T <udp bytes> <udp packets> <tcp bytes> <tcp conns> <cpu ns> <max health> <alive>
//
// Counters are totals since the start; the health score is memberlist's
// (0: healthy), the highest sampled (every second) since the last stats
// line.
//
// Times are the member's wall clock (the bench's too: one machine).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// atSizeEnv selects what a re-executed test binary is: "member" (with its
// configuration in atSizeConfEnv) or "burn".
const (
	atSizeEnv     = "HERALD_MEMBERS_ATSIZE"
	atSizeConfEnv = "HERALD_MEMBERS_ATSIZE_CONF"
)

// burnSink is what a burner spins on.
var burnSink uint64

func TestMain(m *testing.M) {
	switch os.Getenv(atSizeEnv) {
	case "member":
		os.Exit(runAtSizeMember(os.Getenv(atSizeConfEnv)))
	case "burn":
		for { // spin until killed
			burnSink++
		}
	}
	os.Exit(m.Run())
}

// atSizeConf configures one member process.
type atSizeConf struct {
	Name      string
	Addr      netip.Addr
	Port      int // 0: any
	Profile   Profile
	Overrides Tunables
}

func runAtSizeMember(conf string) int {
	var c atSizeConf
	if err := json.Unmarshal([]byte(conf), &c); err != nil {
		fmt.Fprintln(os.Stderr, "member: bad configuration:", err)
		return 2
	}
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	ct := &countingTransport{}
	o := Options{
		NodeName:  c.Name,
		BindAddr:  c.Addr,
		Port:      c.Port,
		anyPort:   c.Port == 0,
		Key:       testKey,
		Profile:   c.Profile,
		Overrides: c.Overrides,
		Ready:     true,
		Logger:    slog.New(eventHandler{out}),
		wrapTransport: func(t memberlist.Transport, _ netip.AddrPort) memberlist.Transport {
			ct.wrap(t)
			return ct
		},
	}
	m, err := Start(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "member %s: %v\n", c.Name, err)
		return 1
	}
	out.printf("R %s", m.Addr())

	// The health score is sampled: memberlist does not log its changes.
	var maxHealth atomic.Int64
	go func() {
		for range time.Tick(time.Second) {
			h := int64(m.ml.GetHealthScore())
			for {
				old := maxHealth.Load()
				if h <= old || maxHealth.CompareAndSwap(old, h) {
					break
				}
			}
		}
	}()

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<22)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "P":
			var peers []Peer // by address only: the bench rotates no key
			for _, s := range strings.Split(arg, ",") {
				if a, err := netip.ParseAddrPort(s); err == nil {
					peers = append(peers, Peer{Addr: a})
				}
			}
			m.SetPeers(peers)
		case "S":
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			cpu := ru.Utime.Nano() + ru.Stime.Nano()
			out.printf("T %d %d %d %d %d %d %d", ct.udpBytes.Load(), ct.udpPackets.Load(), ct.tcpBytes.Load(),
				ct.tcpConns.Load(), cpu, maxHealth.Swap(int64(m.ml.GetHealthScore())), m.ml.NumMembers())
		}
	}
	// The bench is gone or done: stop as a killed speaker would, without
	// leaving.
	return 0
}

// lineWriter writes whole lines to the bench, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	fmt.Fprintf(l.w, format+"\n", args...)
	_ = l.w.Flush()
	l.mu.Unlock()
}

// eventHandler turns the member's and memberlist's log records into event
// lines; everything else is dropped unread.
type eventHandler struct{ out *lineWriter }

func (eventHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h eventHandler) WithAttrs([]slog.Attr) slog.Handler         { return h }
func (h eventHandler) WithGroup(string) slog.Handler              { return h }

func (h eventHandler) Handle(_ context.Context, r slog.Record) error {
	now := time.Now().UnixNano()
	node := func() string {
		var s string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "node" {
				s = a.Value.String()
				return false
			}
			return true
		})
		return s
	}
	msg := r.Message
	switch {
	case msg == "member alive":
		h.out.printf("J %d %s", now, node())
	case msg == "member gone (left or dead)":
		h.out.printf("L %d %s", now, node())
	case strings.HasPrefix(msg, "Suspect "):
		// "Suspect <name> has failed, no acks received"
		if name, _, ok := strings.Cut(strings.TrimPrefix(msg, "Suspect "), " "); ok {
			h.out.printf("S %d %s", now, name)
		}
	case strings.HasPrefix(msg, "Marking "):
		// "Marking <name> as failed, suspect timeout reached (<k> peer confirmations)"
		var name string
		var k int
		if _, err := fmt.Sscanf(msg, "Marking %s as failed, suspect timeout reached (%d", &name, &k); err == nil {
			h.out.printf("M %d %s %d", now, name, k)
		}
	case strings.HasPrefix(msg, "Refuting a suspect message (from: "):
		from := strings.TrimSuffix(strings.TrimPrefix(msg, "Refuting a suspect message (from: "), ")")
		h.out.printf("F %d %s", now, from)
	}
	return nil
}

// countingTransport counts what a member sends: UDP payloads (encrypted,
// without IP and UDP headers) and the bytes written on stream connections,
// the ones it dials and the ones it accepts.
type countingTransport struct {
	memberlist.Transport
	udpBytes, udpPackets atomic.Uint64
	tcpBytes, tcpConns   atomic.Uint64
	streams              chan net.Conn
}

func (c *countingTransport) wrap(t memberlist.Transport) {
	c.Transport = t
	c.streams = make(chan net.Conn)
	go func() {
		for conn := range t.StreamCh() {
			c.tcpConns.Add(1)
			c.streams <- &countingConn{Conn: conn, n: &c.tcpBytes}
		}
	}()
}

func (c *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t, err := c.Transport.WriteTo(b, addr)
	if err == nil {
		c.udpBytes.Add(uint64(len(b)))
		c.udpPackets.Add(1)
	}
	return t, err
}

func (c *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := c.Transport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	c.tcpConns.Add(1)
	return &countingConn{Conn: conn, n: &c.tcpBytes}, nil
}

func (c *countingTransport) StreamCh() <-chan net.Conn { return c.streams }

type countingConn struct {
	net.Conn
	n *atomic.Uint64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(uint64(n))
	return n, err
}
