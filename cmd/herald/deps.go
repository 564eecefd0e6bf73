//go:build tools

package main

// The libraries the speaker, NLLB and metrics will be built on, pinned in
// go.mod before their issues land so that the versions are chosen once and
// proven to resolve and compile together: `go build -tags tools ./cmd/herald`.
import (
	_ "github.com/hashicorp/memberlist"
	_ "github.com/mdlayher/arp"
	_ "github.com/mdlayher/ndp"
	_ "github.com/osrg/gobgp/v4/pkg/server"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/vishvananda/netlink"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
)
