package ccm

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/cloud-provider/names"
)

// ProviderName is the cloud provider's registered name (--cloud-provider) and
// the scheme of its provider IDs.
const ProviderName = "herald"

// HeraldController is the name of the controller that runs Herald's own
// address assignment and ServiceLB inside `herald ccm` (a name for
// --controllers, beside the upstream ones).
const HeraldController = "herald-lb-controller"

// Switches are the two halves of the cloud provider, each on or off on its
// own.
type Switches struct {
	// LoadBalancer: LoadBalancer() is offered, and the upstream service
	// controller and Herald's controller run.
	LoadBalancer bool
	// NodeLifecycle: InstancesV2() is offered, and the upstream cloud-node
	// and cloud-node-lifecycle controllers run.
	NodeLifecycle bool
}

// ErrNothingEnabled is the startup error with both halves off.
var ErrNothingEnabled = errors.New("--enable-load-balancer=false and --enable-node-lifecycle=false: nothing to run; " +
	"enable at least one (with load balancing off, the standalone `herald controller` can still serve Services)")

// Validate refuses the one combination that runs nothing.
func (s Switches) Validate() error {
	if !s.LoadBalancer && !s.NodeLifecycle {
		return ErrNothingEnabled
	}
	return nil
}

// Controllers are the controllers the switches run, sorted: the upstream
// service controller with Herald's for load balancing, the cloud-node and
// cloud-node-lifecycle controllers for node lifecycle. The route controller
// never runs (Routes are not offered).
func (s Switches) Controllers() []string {
	var out []string
	if s.NodeLifecycle {
		out = append(out, names.CloudNodeController, names.CloudNodeLifecycleController)
	}
	if s.LoadBalancer {
		out = append(out, HeraldController, names.ServiceLBController)
	}
	return out
}

// Enabled reports whether a controller runs under these switches.
func (s Switches) Enabled(controller string) bool {
	for _, c := range s.Controllers() {
		if c == controller {
			return true
		}
	}
	return false
}

// CheckCloudConfig refuses a cloud config file with content: Herald's
// provider takes its settings from flags only, and silently ignoring a file
// would hide a mistake.
func CheckCloudConfig(r io.Reader) error {
	if r == nil {
		return nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("reading the cloud config: %w", err)
	}
	if strings.TrimSpace(string(b)) != "" {
		return errors.New("the herald cloud provider takes no cloud config file (--cloud-config); its settings are flags of `herald ccm`")
	}
	return nil
}
