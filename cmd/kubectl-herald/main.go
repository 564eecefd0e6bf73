// Command kubectl-herald is the kubectl plugin `kubectl herald`: why a
// Service is or is not served (explain), and the state of the pools and
// speakers (status). Copy it onto the PATH; kubectl finds it by its name.
// The work is in package explain; this is flags and output.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/explain"
	"github.com/herald-lb/herald/internal/termsafe"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

const usageText = `kubectl herald: why a LoadBalancer Service is or is not served by Herald.

Usage:
  kubectl herald explain svc/NAME [-n NAMESPACE] [-o wide|json|yaml]
  kubectl herald status [-o wide|json|yaml]
  kubectl herald version

explain prints the cause first: the Service's address and pool, or why it has none; for each
address how it is announced (L2, BGP, ServiceLB), which node announces it, and for every other
node why it does not; for BGP each advertising node's sessions as its speaker reports them; the
Service's recent Warning events.

status prints each pool's use, the Services waiting for an address, the addresses no node
announces, each node's speaker (Ready, memberlist members it sees, addresses it answers, BGP
sessions) and the configuration objects with problems.

Both read only what Herald publishes in the API (Services, EndpointSlices, Nodes, the
configuration, the speaker pods and their SpeakerStatus objects, events) and run Herald's
planner on it, electing among the nodes whose speaker pod is Ready. They list the cluster's
Services, EndpointSlices and Nodes, so they need the rights to read them.

Flags:
`

// options are the plugin's own flags.
type options struct {
	output    string
	heraldNS  string
	onlyClass bool
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("kubectl herald", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := newKubeFlags(fs)
	var o options
	fs.StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml (default: text for people)")
	fs.StringVar(&o.heraldNS, "herald-namespace", "herald-system", "the namespace Herald is installed in (its configuration, speakers and status objects)")
	fs.BoolVar(&o.onlyClass, "only-class", false, "Herald's controller runs with --only-class: Services without a loadBalancerClass are not Herald's")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		fmt.Fprintf(stderr, "kubectl herald: -o %q: want wide, json or yaml\n", o.output)
		return 2
	}
	switch rest[0] {
	case "version":
		fmt.Fprintf(stdout, "kubectl-herald %s (commit %s)\n", version, commit)
		return 0
	case "explain":
		if len(rest) != 2 {
			fmt.Fprintln(stderr, "kubectl herald explain: want one Service: svc/NAME (or service/NAME, or NAME)")
			return 2
		}
		name, err := serviceName(rest[1])
		if err != nil {
			fmt.Fprintln(stderr, "kubectl herald explain:", termsafe.Escape(err.Error()))
			return 2
		}
		return do(ctx, kube, o, stdout, stderr, func(c client.Reader, ns string) (any, func(io.Writer, bool) error, error) {
			key := ns + "/" + name
			w, err := explain.Gather(ctx, c, o.heraldNS, key, o.onlyClass)
			if err != nil {
				return nil, nil, err
			}
			rep, err := explain.ExplainService(w, key)
			return rep, func(out io.Writer, wide bool) error { return explain.Write(out, rep, wide, time.Now()) }, err
		})
	case "status":
		if len(rest) != 1 {
			fmt.Fprintln(stderr, "kubectl herald status: takes no argument")
			return 2
		}
		return do(ctx, kube, o, stdout, stderr, func(c client.Reader, _ string) (any, func(io.Writer, bool) error, error) {
			w, err := explain.Gather(ctx, c, o.heraldNS, "", o.onlyClass)
			if err != nil {
				return nil, nil, err
			}
			rep := explain.Status(w)
			return rep, func(out io.Writer, wide bool) error { return explain.WriteStatus(out, rep, wide) }, nil
		})
	}
	fmt.Fprintf(stderr, "kubectl herald: unknown command %q\n\n", rest[0])
	fs.Usage()
	return 2
}

// newKubeFlags binds kubectl's connection flags (--kubeconfig, --context,
// --cluster, --user, -n/--namespace, --server, --token, ...) to fs, and
// returns the client configuration they describe once fs is parsed.
func newKubeFlags(fs *pflag.FlagSet) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	fs.StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	overrides := &clientcmd.ConfigOverrides{}
	clientcmd.BindOverrideFlags(overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// serviceName reads svc/NAME, service/NAME, services/NAME or NAME.
func serviceName(arg string) (string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		kind, name = "svc", arg
	}
	switch kind {
	case "svc", "service", "services":
	default:
		return "", fmt.Errorf("%q: only Services are explained (svc/NAME)", arg)
	}
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q: want svc/NAME", arg)
	}
	return name, nil
}

// do connects, computes a report and prints it in the chosen format. The
// text format escapes the objects' texts (explain.Write); an error may
// quote them too (names, the API server's message), so it is printed as
// one escaped line. JSON and YAML are printed as their encoders write them.
func do(ctx context.Context, kube clientcmd.ClientConfig, o options, stdout, stderr io.Writer,
	report func(c client.Reader, ns string) (any, func(io.Writer, bool) error, error)) int {
	cfg, err := kube.ClientConfig()
	if err != nil {
		fmt.Fprintln(stderr, "kubectl herald:", termsafe.Escape(err.Error()))
		return 1
	}
	ns, _, err := kube.Namespace()
	if err != nil {
		fmt.Fprintln(stderr, "kubectl herald:", termsafe.Escape(err.Error()))
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		fmt.Fprintln(stderr, "kubectl herald:", termsafe.Escape(err.Error()))
		return 1
	}
	rep, text, err := report(c, ns)
	if err != nil {
		fmt.Fprintln(stderr, "kubectl herald:", termsafe.Escape(err.Error()))
		return 1
	}
	return done(write(stdout, o.output, rep, text), stderr)
}

// write prints rep as output asks: JSON, YAML (control characters escaped
// in both, the values read back exact), or the table text writes.
func write(stdout io.Writer, output string, rep any, text func(io.Writer, bool) error) error {
	var b []byte
	var err error
	switch output {
	case "json":
		b, err = termsafe.MarshalJSON(rep) // DEL and C1 controls escaped too
		b = append(b, '\n')
	case "yaml":
		b, err = termsafe.MarshalYAML(rep) // yaml.Marshal refuses DEL and C1 controls
	default:
		return text(stdout, output == "wide")
	}
	if err == nil {
		_, err = stdout.Write(b)
	}
	return err
}

func done(err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintln(stderr, "kubectl herald:", termsafe.Escape(err.Error()))
		return 1
	}
	return 0
}
