// Command runcwrap is an OCI runtime that stands in front of runc on hosts whose capability bounding set lacks
// capabilities that Docker grants privileged containers (these machines' root has no CAP_SYS_RESOURCE, and kind
// runs every node --privileged: runc then fails with "unable to apply caps: operation not permitted").
//
// It takes every capability the host process does not hold in its bounding set out of the container's process
// (`create`/`run`: <bundle>/config.json; `exec`: the --process file) and then execs the real runc with the same
// arguments. Everything else passes through untouched. e2e/kind/kind.sh registers it as dockerd's default runtime
// only where a capability is missing.
//
// The real runc is $HERALD_REAL_RUNC, else the first runc on PATH that is not this program.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	args := os.Args[1:]
	if err := filter(args, boundingSet()); err != nil {
		fmt.Fprintln(os.Stderr, "runcwrap:", err)
		os.Exit(1)
	}
	real, err := realRunc()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runcwrap:", err)
		os.Exit(1)
	}
	err = syscall.Exec(real, append([]string{real}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "runcwrap: exec", real+":", err)
	os.Exit(1)
}

func realRunc() (string, error) {
	if p := os.Getenv("HERALD_REAL_RUNC"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "runc")
		if r, err := filepath.EvalSymlinks(p); err == nil && r != self {
			if st, err := os.Stat(r); err == nil && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no runc on PATH (set HERALD_REAL_RUNC)")
}

// capNames are the capabilities by number, as OCI specs name them.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// boundingSet reads this process's capability bounding set (CapBnd in /proc/self/status); nil if unreadable
// (then nothing is filtered).
func boundingSet() map[string]bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	return parseCapBnd(string(b))
}

// parseCapBnd returns the names of the capabilities set in the CapBnd line of a /proc/PID/status text.
// Capabilities this program does not know by name are not reported (and so never filtered).
func parseCapBnd(status string) map[string]bool {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil
		}
		have := map[string]bool{}
		for i, n := range capNames {
			if mask&(1<<i) != 0 {
				have[n] = true
			}
		}
		return have
	}
	return nil
}

// filter rewrites the process specification that runc is about to use for args so that it asks for no
// capability outside have. A nil have changes nothing.
func filter(args []string, have map[string]bool) error {
	if have == nil {
		return nil
	}
	cmd, rest := subcommand(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "bundle", "b")
		if bundle == "" {
			bundle = "."
		}
		return rewriteJSON(filepath.Join(bundle, "config.json"), func(doc map[string]any) {
			if proc, ok := doc["process"].(map[string]any); ok {
				dropCaps(proc, have)
			}
		})
	case "exec":
		if p := flagValue(rest, "process", "p"); p != "" {
			return rewriteJSON(p, func(doc map[string]any) { dropCaps(doc, have) })
		}
	}
	return nil
}

// globalWithValue are runc's global flags that take a value as the next argument.
var globalWithValue = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true,
	"--rootless": true}

// subcommand finds runc's command among its arguments (after the global flags) and the arguments after it.
func subcommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if globalWithValue[a] {
			i++
		}
	}
	return "", nil
}

// flagValue returns the value of --long or -short in args (as "--long V", "--long=V", "-short V").
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, name := range []string{"--" + long, "-" + long, "-" + short} {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// dropCaps removes capabilities outside have from every set of an OCI process object.
func dropCaps(proc map[string]any, have map[string]bool) {
	caps, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return
	}
	for set, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := []any{}
		for _, c := range list {
			if s, ok := c.(string); ok && known(s) && !have[s] {
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
}

func known(name string) bool {
	for _, n := range capNames {
		if n == name {
			return true
		}
	}
	return false
}

func rewriteJSON(path string, edit func(map[string]any)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, st.Mode().Perm())
}
