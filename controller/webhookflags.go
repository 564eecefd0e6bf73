package controller

import (
	"flag"
	"fmt"
	"strings"
)

// AddFlags adds the admission webhook's flags to fs: `herald controller` and
// `herald ccm` (whose controller serves it when load balancing is on) share
// them, herald ccm's with the prefix herald- (the upstream manager has webhook
// flags of its own). The returned function completes w once fs is parsed: the
// certificate's names, <service>.<namespace>.svc for the namespace it reads
// then, and the extra hosts. It fails when the webhook would have no name.
func (w *WebhookOptions) AddFlags(fs *flag.FlagSet, prefix string, namespace *string) func() error {
	fs.StringVar(&w.Addr, prefix+"webhook-bind-address", w.Addr, "admission webhook HTTPS listen address, e.g. :9443 (\"\": no webhook)")
	fs.StringVar(&w.ConfigName, prefix+"webhook-configuration", w.ConfigName, "ValidatingWebhookConfiguration to patch the webhook's CA bundle into")
	fs.StringVar(&w.Secret, prefix+"webhook-secret", w.Secret, "Secret in --namespace holding the webhook's CA and serving certificate (Herald manages it)")
	service := fs.String(prefix+"webhook-service", "", "the webhook's Service in --namespace: its certificate names <service>.<namespace>.svc")
	hosts := fs.String(prefix+"webhook-cert-hosts", "", "more DNS names or IP addresses for the webhook's certificate, comma-separated")
	fs.DurationVar(&w.SyncInterval, prefix+"webhook-sync-interval", w.SyncInterval, "how often the webhook's Secret and CA bundle are checked")
	fs.IntVar(&w.MaxInFlight, prefix+"webhook-max-in-flight", w.MaxInFlight, "admission requests judged at once; more wait up to --"+prefix+"webhook-queue-wait for a turn, then get a busy answer (the failurePolicy applies)")
	fs.DurationVar(&w.QueueWait, prefix+"webhook-queue-wait", w.QueueWait, "how long an admission request waits for its turn")
	return func() error {
		if *service != "" {
			w.Policy.Hosts = append(w.Policy.Hosts, *service+"."+*namespace+".svc")
		}
		for _, h := range strings.Split(*hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				w.Policy.Hosts = append(w.Policy.Hosts, h)
			}
		}
		if w.Addr != "" && len(w.Policy.Hosts) == 0 {
			return fmt.Errorf("--%[1]swebhook-bind-address needs --%[1]swebhook-service or --%[1]swebhook-cert-hosts (the names of its certificate)", prefix)
		}
		return nil
	}
}
