package svclb

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds one attempt to reach a destination; after it the
// proxy tries the next one.
const dialTimeout = 3 * time.Second

// picker hands out the destinations of the client's family round-robin.
type picker struct {
	c    Config
	next atomic.Uint32
}

// order returns every destination of the family of client, starting with
// the next in turn: the first is tried, the others are the retries.
func (p *picker) order(client netip.Addr) []netip.Addr {
	fam := 4
	if client.Unmap().Is6() {
		fam = 6
	}
	d := p.c.Dests(fam)
	if len(d) == 0 {
		return nil
	}
	start := int(p.next.Add(1)-1) % len(d)
	return append(d[start:len(d):len(d)], d[:start]...)
}

// allowed reports whether a client address is in an allowed source range.
func allowed(c Config, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range c.SrcRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// proxy is the userspace forwarder: a listener for the configured protocol
// on SRC_PORT (both families).
type proxy struct {
	c    Config
	log  *slog.Logger
	pick picker
	ln   net.Listener   // TCP
	pc   *net.UDPConn   // UDP
	wg   sync.WaitGroup // connection and session goroutines
}

// listenProxy opens the listening socket; serve runs it.
func listenProxy(c Config, log *slog.Logger) (*proxy, error) {
	p := &proxy{c: c, log: log, pick: picker{c: c}}
	addr := net.JoinHostPort("", strconv.Itoa(int(c.SrcPort)))
	var err error
	switch c.Proto {
	case TCP:
		p.ln, err = net.Listen("tcp", addr)
	case UDP:
		var ua *net.UDPAddr
		if ua, err = net.ResolveUDPAddr("udp", addr); err == nil {
			p.pc, err = net.ListenUDP("udp", ua)
		}
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// serve forwards until ctx ends, then closes everything and waits.
func (p *proxy) serve(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		if p.ln != nil {
			p.ln.Close()
		}
		if p.pc != nil {
			p.pc.Close()
		}
	})
	defer stop()
	if p.ln != nil {
		p.serveTCP(ctx)
	} else {
		p.serveUDP(ctx)
	}
	p.wg.Wait()
}

func (p *proxy) serveTCP(ctx context.Context) {
	var mu sync.Mutex
	open := map[net.Conn]struct{}{}
	defer func() {
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				p.log.Error("accept failed", "error", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return
		}
		client := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
		if !allowed(p.c, client) {
			p.log.Debug("refused a client outside the source ranges", "client", client)
			c.Close()
			continue
		}
		mu.Lock()
		open[c] = struct{}{}
		mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handleTCP(ctx, c.(*net.TCPConn), client)
			mu.Lock()
			delete(open, c)
			mu.Unlock()
		}()
	}
}

func (p *proxy) dialAny(ctx context.Context, network string, client netip.Addr) (net.Conn, error) {
	var errs []error
	for _, d := range p.pick.order(client) {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		var dl net.Dialer
		up, err := dl.DialContext(dctx, network, netip.AddrPortFrom(d, p.c.DestPort).String())
		cancel()
		if err == nil {
			return up, nil
		}
		p.log.Warn("destination unreachable, trying the next", "destination", d, "error", err)
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("no destination of the client's family")
	}
	return nil, errors.Join(errs...)
}

func (p *proxy) handleTCP(ctx context.Context, c *net.TCPConn, client netip.Addr) {
	defer c.Close()
	up, err := p.dialAny(ctx, "tcp", client)
	if err != nil {
		p.log.Error("no destination reachable, closing the client connection", "client", client, "error", err)
		return
	}
	defer up.Close()
	// Both directions, each half-closing the other side when it ends:
	// io.Copy between two TCP connections splices in the kernel.
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.CloseWrite()
	<-done
}

// udpSession is one client's flow: a connected socket to one destination.
type udpSession struct {
	up   *net.UDPConn
	last atomic.Int64 // unix nanoseconds of the last datagram either way
}

func (p *proxy) serveUDP(ctx context.Context) {
	var mu sync.Mutex
	sessions := map[netip.AddrPort]*udpSession{}
	defer func() {
		mu.Lock()
		for _, s := range sessions {
			s.up.Close()
		}
		mu.Unlock()
	}()
	// session returns the client's session, opening one if it has none.
	session := func(from netip.AddrPort) *udpSession {
		mu.Lock()
		s := sessions[from]
		mu.Unlock()
		if s != nil {
			return s
		}
		up, err := p.dialAny(ctx, "udp", from.Addr())
		if err != nil {
			p.log.Error("no destination for a UDP client", "client", from, "error", err)
			return nil
		}
		s = &udpSession{up: up.(*net.UDPConn)}
		s.last.Store(time.Now().UnixNano())
		mu.Lock()
		sessions[from] = s
		mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.udpReplies(s, from)
			mu.Lock()
			if sessions[from] == s {
				delete(sessions, from)
			}
			mu.Unlock()
			s.up.Close()
		}()
		return s
	}
	buf := make([]byte, 65535)
	for {
		n, from, err := p.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				p.log.Error("UDP read failed", "error", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return
		}
		if !allowed(p.c, from.Addr()) {
			p.log.Debug("dropped a datagram from outside the source ranges", "client", from)
			continue
		}
		// Twice at most: a session that timed out just now is closed;
		// its datagram goes to a new one.
		for try := 0; try < 2; try++ {
			s := session(from)
			if s == nil {
				break
			}
			s.last.Store(time.Now().UnixNano())
			_, err := s.up.Write(buf[:n])
			if errors.Is(err, net.ErrClosed) {
				mu.Lock()
				if sessions[from] == s {
					delete(sessions, from)
				}
				mu.Unlock()
				continue
			}
			if err != nil {
				p.log.Debug("UDP write to the destination failed", "client", from, "error", err)
			}
			break
		}
	}
}

// udpReplies copies the destination's datagrams back to the client until
// the session has been idle for the timeout.
func (p *proxy) udpReplies(s *udpSession, client netip.AddrPort) {
	buf := make([]byte, 65535)
	for {
		idle := time.Duration(time.Now().UnixNano() - s.last.Load())
		if idle >= p.c.UDPIdleTimeout {
			p.log.Debug("UDP session idle, closing", "client", client)
			return
		}
		s.up.SetReadDeadline(time.Now().Add(p.c.UDPIdleTimeout - idle))
		n, err := s.up.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // re-check the idle time: the client may have sent since
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ECONNREFUSED from an ICMP error: the destination is not
			// listening now; keep the session for when it is.
			continue
		}
		s.last.Store(time.Now().UnixNano())
		if _, err := p.pc.WriteToUDPAddrPort(buf[:n], client); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Debug("UDP write to the client failed", "client", client, "error", err)
		}
	}
}
