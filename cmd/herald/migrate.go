package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/config/metallb"
	"github.com/herald-lb/herald/controller"
	"github.com/herald-lb/herald/internal/termsafe"
)

// Exit codes of herald migrate.
const (
	migrateOK         = 0 // everything carried over
	migrateFailed     = 1 // bad flags, or the input could not be read or the output written
	migrateNotCarried = 2 // written, but something did not carry over (the report says what)
)

type migrateFlags struct {
	fromCluster      bool
	kubeconfig       string
	metallbNamespace string
	files            fileList
	namespace        string
	out              string
}

// fileList is a repeatable -f.
type fileList []string

func (l *fileList) String() string     { return strings.Join(*l, ",") }
func (l *fileList) Set(v string) error { *l = append(*l, v); return nil }

func runMigrate(args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseMigrateFlags(args, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	objs, err := readFiles(f.files, os.Stdin)
	if err == nil && f.fromCluster {
		var fromCluster []metallb.Object
		fromCluster, err = readClusterWith(ctx, f.kubeconfig, f.metallbNamespace, objs, stderr)
		objs = append(objs, fromCluster...)
	}
	if err != nil {
		// The error may quote the input (names, values): one line, escaped.
		fmt.Fprintln(stderr, "herald migrate:", termsafe.Escape(err.Error()))
		return migrateFailed
	}
	res := metallb.Convert(objs, metallb.Options{Namespace: f.namespace, MetalLBNamespace: f.metallbNamespace})
	if err := writeOutput(res, f.out, stdout); err != nil {
		fmt.Fprintln(stderr, "herald migrate:", termsafe.Escape(err.Error()))
		return migrateFailed
	}
	fmt.Fprint(stderr, res.Report.Render(termsafe.Escape)) // each finding's texts escaped
	if !res.Report.Carried() {
		return migrateNotCarried
	}
	return migrateOK
}

func parseMigrateFlags(args []string, stderr io.Writer) (migrateFlags, int, bool) {
	var f migrateFlags
	fs := flag.NewFlagSet("herald migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: herald migrate [--from-cluster [--kubeconfig K] [--metallb-namespace NS]] [-f FILE_OR_DIR ...] [--namespace NS] [-o OUT.yaml]")
		fmt.Fprintln(stderr, "\nConverts MetalLB's configuration (metallb.io objects, or the ConfigMap of MetalLB v0.12 and older) into")
		fmt.Fprintln(stderr, "Herald's, with copies of the BGP password Secrets. Writes the objects as YAML to stdout (or -o) and a report")
		fmt.Fprintln(stderr, "of what did not carry over, and what Herald says of the result, to stderr (docs/metallb.md).")
		fmt.Fprintln(stderr, "Exit code 0: everything carried over; 1: bad flags, or the input could not be read; 2: written, but")
		fmt.Fprintln(stderr, "something did not carry over.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	fs.BoolVar(&f.fromCluster, "from-cluster", false, "read MetalLB's objects, its ConfigMap and the Secrets its BGPPeers name from the cluster")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for --from-cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&f.metallbNamespace, "metallb-namespace", metallb.DefaultMetalLBNamespace, "MetalLB's namespace: read with --from-cluster, and assumed for objects in files that name none")
	fs.Var(&f.files, "f", "a file or directory (its .yaml, .yml and .json files) of MetalLB objects, - for stdin; repeatable")
	fs.StringVar(&f.namespace, "namespace", controller.DefaultOptions().Namespace, "Herald's install namespace: the namespace of the objects written")
	fs.StringVar(&f.out, "o", "", "write the objects to this file instead of stdout")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, migrateOK, false
		}
		return f, migrateFailed, false
	}
	fail := func(msg string) (migrateFlags, int, bool) {
		fmt.Fprintln(stderr, "herald migrate:", msg)
		return f, migrateFailed, false
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Sprintf("unexpected arguments: %q (files are given with -f)", fs.Args()))
	case !f.fromCluster && len(f.files) == 0:
		return fail("nothing to read: give -f FILE_OR_DIR, --from-cluster, or both")
	case f.kubeconfig != "" && !f.fromCluster:
		return fail("--kubeconfig needs --from-cluster")
	case f.namespace == "" || f.metallbNamespace == "":
		return fail("--namespace and --metallb-namespace may not be empty")
	}
	return f, migrateOK, true
}

// readFiles reads the objects of the files and directories named, in
// order; "-" is stdin.
func readFiles(paths []string, stdin io.Reader) ([]metallb.Object, error) {
	var out []metallb.Object
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, name := range files {
			objs, err := readFile(name, stdin)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

// expand lists a directory's YAML and JSON files (not its subdirectories),
// sorted; any other path stands for itself.
func expand(path string) ([]string, error) {
	if path == "-" {
		return []string{path}, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				out = append(out, filepath.Join(path, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", path)
	}
	sort.Strings(out)
	return out, nil
}

func readFile(name string, stdin io.Reader) ([]metallb.Object, error) {
	if name == "-" {
		return metallb.ReadObjects(stdin, "stdin")
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return metallb.ReadObjects(f, name)
}

// metallbResources are the configuration kinds read from the cluster, each
// in the versions tried in order (BGPPeer: v1beta1 before MetalLB v0.13.10).
var metallbResources = []struct {
	resource string
	versions []string
}{
	{"ipaddresspools", []string{"v1beta1"}},
	{"l2advertisements", []string{"v1beta1"}},
	{"bgpadvertisements", []string{"v1beta1"}},
	{"bgppeers", []string{"v1beta2", "v1beta1"}},
	{"communities", []string{"v1beta1"}},
	{"bfdprofiles", []string{"v1beta1"}},
}

func readClusterWith(ctx context.Context, kubeconfig, namespace string, fromFiles []metallb.Object, warn io.Writer) ([]metallb.Object, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig: %w", err)
	}
	cfg.UserAgent = "herald-migrate/" + version
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return readCluster(ctx, dyn, namespace, fromFiles, warn)
}

// readCluster lists MetalLB's configuration objects in its namespace, reads
// its legacy ConfigMap, and reads the Secrets the BGPPeers (of the cluster
// and of fromFiles) name. A kind the cluster does not serve, a missing
// ConfigMap and a missing Secret are skipped (Convert reports a missing
// Secret); a Secret that may not be read is said on warn. A BGPPeer naming
// a Secret outside namespace is refused (metallb.PasswordSecrets): no
// Secret is read then.
func readCluster(ctx context.Context, dyn dynamic.Interface, namespace string, fromFiles []metallb.Object, warn io.Writer) ([]metallb.Object, error) {
	var out []metallb.Object
	for _, r := range metallbResources {
		objs, err := listMetalLB(ctx, dyn, namespace, r.resource, r.versions)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	configMaps := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(namespace)
	cm, err := configMaps.Get(ctx, metallb.LegacyConfigMap, metav1.GetOptions{})
	switch {
	case err == nil:
		out = append(out, cm.Object)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, metallb.LegacyConfigMap, err)
	}
	refs, err := metallb.PasswordSecrets(append(append([]metallb.Object(nil), fromFiles...), out...), namespace)
	if err != nil {
		return nil, err
	}
	secrets := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	for _, ref := range refs {
		s, err := secrets.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			out = append(out, s.Object)
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			fmt.Fprintf(warn, "herald migrate: cannot read Secret %s: %s\n", termsafe.Escape(ref.String()), termsafe.Escape(err.Error()))
		default:
			return nil, fmt.Errorf("reading Secret %s: %w", ref, err)
		}
	}
	return out, nil
}

// listMetalLB lists one of MetalLB's resources in the first version the
// cluster serves; none when it serves none.
func listMetalLB(ctx context.Context, dyn dynamic.Interface, namespace, resource string, versions []string) ([]metallb.Object, error) {
	for _, v := range versions {
		gvr := schema.GroupVersionResource{Group: metallb.Group, Version: v, Resource: resource}
		list, err := dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s.%s/%s in %s: %w", resource, metallb.Group, v, namespace, err)
		}
		out := make([]metallb.Object, 0, len(list.Items))
		for _, it := range list.Items {
			out = append(out, it.Object)
		}
		return out, nil
	}
	return nil, nil
}

// writeOutput writes the objects to path, or to stdout when path is "".
func writeOutput(res *metallb.Result, path string, stdout io.Writer) error {
	var b bytes.Buffer
	if err := res.WriteYAML(&b); err != nil {
		return err
	}
	if path == "" {
		_, err := stdout.Write(b.Bytes())
		return err
	}
	// The copies of password Secrets may be in it.
	return os.WriteFile(path, b.Bytes(), 0o600)
}
