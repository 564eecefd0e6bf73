//go:build e2e

// Package e2e holds Herald's end-to-end suites. They are written against Cluster, a small view of a running
// cluster with its routers, a client host and fault injection, so that the same suites run in the local lab
// (e2e/lab, implemented by package e2e/lab) and, later, in kind.
package e2e

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Cluster is a running Kubernetes cluster with its network around it.
type Cluster interface {
	// Name identifies the implementation ("lab", "kind").
	Name() string
	// Kube is a client with cluster-admin rights.
	Kube() kubernetes.Interface
	// RESTConfig is the configuration behind Kube.
	RESTConfig() *rest.Config
	// Nodes are the cluster's nodes as they sit on the LAN.
	Nodes() []Node
	// Routers are the BGP routers the speakers can peer with.
	Routers() []Router
	// Client is a host on the LAN, outside the cluster.
	Client() ClientHost
	// ExternalClient is a host behind a router (FRR in the lab) on its own subnet: it reaches BGP addresses
	// only through the routes the router learned.
	ExternalClient() ClientHost
	// Faults breaks and repairs nodes.
	Faults() Faults
	// Ranges are the load-balancer address ranges the cluster's network reserves for Herald.
	Ranges() Ranges
	// Images names the images the cluster already holds.
	Images() Images
	// InstallHerald installs Herald the cluster's way — the controller, and the speakers when speakers is set
	// (the lab's minimal manifests; kind's `helm install` of charts/herald, which always brings the speakers) —
	// waits until it runs and returns a function that removes it again. The CRDs and the herald.dev objects
	// stay.
	InstallHerald(ctx context.Context, speakers bool) (remove func(context.Context) error, err error)
	// Lacks says why the cluster cannot offer f, or "" when it can. Suites skip what needs a missing feature
	// through Require, with that reason.
	Lacks(f Feature) string
}

// Feature is something a suite may need that not every Cluster has.
type Feature string

const (
	// FeatureFRR: an FRR router among Routers() (TCP MD5 passwords and per-session timers on its neighbours).
	FeatureFRR Feature = "an FRR router"
	// FeatureBFD: a router that runs BFD with the nodes (Router.EnableBFD works).
	FeatureBFD Feature = "a router with BFD"
	// FeatureImageImport: the cluster implements ImageImporter (the migration suite loads MetalLB's images).
	FeatureImageImport Feature = "importing image tarballs into every node"
	// FeatureNodePause: Faults.PauseNode and ResumeNode work.
	FeatureNodePause Feature = "pausing a whole node"
)

// Require skips t, naming the reason, when c lacks f.
func Require(t testing.TB, c Cluster, f Feature) {
	t.Helper()
	if why := c.Lacks(f); why != "" {
		t.Skipf("needs %s, which the %s cluster lacks: %s", f, c.Name(), why)
	}
}

// Node is a Kubernetes node and its LAN attachment.
type Node struct {
	Name      string           // Kubernetes node name
	Interface string           // the node's LAN interface, as seen on the node (and by hostNetwork pods)
	MAC       net.HardwareAddr // the LAN interface's MAC address (the one ARP/NDP answers from this node carry)
	IPv4      netip.Addr       // LAN addresses
	IPv6      netip.Addr
	PodCIDR   netip.Prefix
	PodCIDRv6 netip.Prefix // the node's IPv6 pod range; invalid (zero) when the cluster is single-stack IPv4
}

// Ranges are address ranges kept free for load-balancer addresses.
type Ranges struct {
	L2, L2v6   netip.Prefix // on the LAN: announced by ARP/NDP
	BGP, BGPv6 netip.Prefix // off the LAN: announced to the routers
}

// Images are image references present on every node (pull policy Never or IfNotPresent).
type Images struct {
	Echo   string // HTTP/UDP echo backend: answers with its pod and node name (e2e/lab/images/echo)
	Herald string // Herald's image; empty when it could not be built
}

// Router is a BGP router next to the cluster.
type Router interface {
	// Name is a short name ("gobgp", "frr").
	Name() string
	// ASN is the router's own AS number; PeerASN the AS number it expects from the nodes.
	ASN() uint32
	PeerASN() uint32
	// Addresses are the router's LAN addresses (IPv4 and IPv6).
	Addresses() []netip.Addr
	// Ping checks that the router runs and answers its CLI.
	Ping(ctx context.Context) error
	// Neighbors lists the router's BGP neighbours.
	Neighbors(ctx context.Context) ([]Neighbor, error)
	// Routes reads the router's BGP RIB (IPv4 and IPv6 unicast).
	Routes(ctx context.Context) ([]Route, error)
	// Route reads one prefix with every path's attributes (LocalPref, communities, large communities, which
	// Routes may leave out); found is false when the router has no path for it.
	Route(ctx context.Context, prefix netip.Prefix) (r Route, found bool, err error)
	// AddNeighbor configures a neighbour beside the router's dynamic ones for the nodes — another AS (iBGP
	// with the router's own), a TCP MD5 password — until remove is called.
	AddNeighbor(ctx context.Context, n StaticNeighbor) (remove func(context.Context) error, err error)
	// EnableBFD turns BFD on for the router's sessions with the nodes, with the given timers, until disable is
	// called. A router without BFD returns an error that wraps errors.ErrUnsupported.
	EnableBFD(ctx context.Context, t BFDTimers) (disable func(context.Context) error, err error)
	// BFDPeers lists the router's BFD sessions (none on a router without BFD).
	BFDPeers(ctx context.Context) ([]BFDPeer, error)
}

// BFDTimers are a router's BFD settings for the nodes.
type BFDTimers struct {
	Receive, Transmit time.Duration // whole milliseconds
	DetectMultiplier  int
}

// BFDPeer is one BFD session seen from a router.
type BFDPeer struct {
	Address netip.Addr
	Up      bool
	State   string // as the router names it
	// Receive and Transmit are the router's own intervals; RemoteReceive and RemoteTransmit the peer's, as the
	// router learned them. The session runs at the slower of each pair.
	Receive, Transmit, RemoteReceive, RemoteTransmit time.Duration
	RemoteDetectMultiplier                           int
}

// StaticNeighbor is a neighbour configured on a router by a test.
type StaticNeighbor struct {
	Address  netip.Addr
	ASN      uint32 // the AS the router expects from it (the router's own: iBGP)
	Password string // TCP MD5 password; empty: none
	// HoldTime and Keepalive are the router's timers for the session (zero: the router's defaults).
	HoldTime, Keepalive time.Duration
}

// Neighbor is one BGP session seen from a router.
type Neighbor struct {
	Address     netip.Addr
	ASN         uint32
	State       string // as the router names it
	Established bool
}

// Route is a prefix in a router's RIB and every path it has for it.
type Route struct {
	Prefix netip.Prefix
	Paths  []Path
}

// Path is one way to a prefix.
type Path struct {
	NextHop netip.Addr
	Peer    netip.Addr // the neighbour it was learned from
	Best    bool       // selected (best or multipath)
	// Communities are the path's standard communities as "ASN:VALUE" and LargeCommunities its large ones as
	// "GLOBAL:DATA1:DATA2", sorted. Routes fills them where the router's listing shows them (gobgpd's does, FRR's
	// does not); Route always does.
	Communities, LargeCommunities []string
	// LocalPref is the path's LOCAL_PREF (iBGP paths; 0 when absent). Filled by Route.
	LocalPref uint32
}

// NextHops are the next hops of the route's selected paths.
func (r Route) NextHops() []netip.Addr {
	var out []netip.Addr
	for _, p := range r.Paths {
		if p.Best {
			out = append(out, p.NextHop)
		}
	}
	return out
}

// ClientHost is a host on the LAN outside the cluster, the way a user reaches Services.
type ClientHost interface {
	// Addresses are the client's LAN addresses.
	Addresses() []netip.Addr
	// DialTCP and DialUDP open connections from the client.
	DialTCP(ctx context.Context, to netip.AddrPort) (net.Conn, error)
	DialUDP(ctx context.Context, to netip.AddrPort) (net.Conn, error)
	// HTTP is an HTTP client whose connections start at the client host.
	HTTP() *http.Client
	// Neighbor resolves addr on the LAN the way the kernel does (it sends traffic to addr first) and
	// returns the MAC address in the client's neighbour table.
	Neighbor(ctx context.Context, addr netip.Addr) (net.HardwareAddr, error)
	// ForgetNeighbor removes addr from the client's neighbour table, so that the next packet resolves it anew.
	ForgetNeighbor(ctx context.Context, addr netip.Addr) error
	// WatchNeighbor reports every change of the client's neighbour entry for addr as the kernel announces it
	// (the NUD state: "REACHABLE", "STALE", "DELAY", "PROBE", "FAILED", "INCOMPLETE", or "DELETED"), until ctx
	// ends; the channel is closed then.
	WatchNeighbor(ctx context.Context, addr netip.Addr) (<-chan NeighborChange, error)
	// NeighborTimers sets the client's unreachability detection timers on each of its interfaces, IPv4 and IPv6:
	// the base reachable time (an entry stays REACHABLE a random half to one and a half of it) and the delay
	// before the first probe of a STALE entry in use. The returned function puts back the values found.
	NeighborTimers(ctx context.Context, baseReachable, delayFirstProbe time.Duration) (func() error, error)
	// RouteVia routes prefix from the client through a node's LAN address, standing in for routing that a
	// speaker would otherwise provide. The returned function removes the route.
	RouteVia(ctx context.Context, prefix netip.Prefix, node string) (func() error, error)
	// StreamUDP sends numbered datagrams to an echo server every interval until ctx ends and reports the
	// gaps between answers.
	StreamUDP(ctx context.Context, to netip.AddrPort, interval time.Duration) (StreamReport, error)
}

// NeighborChange is one change of a neighbour entry.
type NeighborChange struct {
	At    time.Time
	State string
	MAC   net.HardwareAddr // nil when the entry has none (INCOMPLETE, FAILED, DELETED)
}

// StreamReport summarises a StreamUDP run.
type StreamReport struct {
	Sent, Received int
	// MaxGap is the longest time without an answer between the first and the last answer.
	MaxGap time.Duration
	// Backends counts answers by "pod|node" of the echo backend that sent them.
	Backends map[string]int
	// FirstAnswer is the time from the first datagram sent to the first answer.
	FirstAnswer time.Duration
	// Unanswered are the sequence numbers (0 is the first datagram) that got no answer.
	Unanswered []int
}

// Announcer is implemented by clusters that can announce prefixes over BGP from nodes without Herald (the lab
// runs a stand-in gobgpd in the node's namespace). Suites use it to test the routers and the data path before,
// or independently of, the speaker. Do not use it on a node where a Herald speaker peers with the same routers.
type Announcer interface {
	// Announce advertises the prefixes from each node to every router and waits until the sessions are up.
	Announce(ctx context.Context, nodes []string, prefixes ...netip.Prefix) error
	// StopAnnouncing stops the node's stand-in (its routes are withdrawn).
	StopAnnouncing(ctx context.Context, node string) error
}

// ImageImporter is implemented by clusters whose nodes can load a docker-archive image tarball without a registry.
type ImageImporter interface {
	// ImportImage loads the tarball into the container runtime of every node.
	ImportImage(ctx context.Context, tarball string) error
}

// Faults injects failures into nodes.
type Faults interface {
	// StopSpeaker kills the Herald speaker container on the node (its kubelet restarts it).
	StopSpeaker(ctx context.Context, node string) error
	// CutLink takes the node off the LAN (its link goes down at the switch); RestoreLink puts it back.
	CutLink(ctx context.Context, node string) error
	RestoreLink(ctx context.Context, node string) error
	// Partition drops every TCP and UDP packet to or from port between node and the other nodes, both ways,
	// leaving all other traffic alone (the API server, the data path): with the speakers' memberlist port it
	// splits their gossip while everything else works. heal removes the partition.
	Partition(ctx context.Context, node string, port int) (heal func(context.Context) error, err error)
	// PauseNode freezes every process of the node (kind: `docker pause` of its container) while its link stays
	// up: it stops answering without going away. ResumeNode thaws it. Clusters without it return an error that
	// wraps errors.ErrUnsupported (Lacks(FeatureNodePause) says why).
	PauseNode(ctx context.Context, node string) error
	ResumeNode(ctx context.Context, node string) error
}
