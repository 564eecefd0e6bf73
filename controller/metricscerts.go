package controller

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/herald-lb/herald/controller/webhook"
)

// MetricsCerts are the certificates of the metrics servers, each kept by
// webhook.Certs in a kubernetes.io/tls Secret of the install namespace with
// a CA of its own (ca.crt, what a scraper trusts; a speaker's key cannot
// sign for the controller's name): the controller's, which it serves, and
// the speakers', which they mount (all speakers serve one certificate, for
// the name of their metrics Service: a scraper dials a pod's address and
// checks that name). A zero Secret name keeps none.
type MetricsCerts struct {
	Secret, SpeakerSecret string
	Hosts, SpeakerHosts   []string
	// SyncInterval is how often the Secrets are checked (default 1 minute).
	SyncInterval time.Duration

	served atomic.Pointer[webhook.Certs]
}

// Certificate is the controller's metrics certificate (nil: none loaded
// yet, or none kept).
func (m *MetricsCerts) Certificate() *tls.Certificate {
	if c := m.served.Load(); c != nil {
		return c.Certificate()
	}
	return nil
}

// setup adds the keepers to mgr; they run on every replica.
func (m *MetricsCerts) setup(mgr manager.Manager, namespace string, log *slog.Logger) error {
	interval := m.SyncInterval
	if interval <= 0 {
		interval = time.Minute
	}
	for _, k := range []struct {
		secret, component string
		hosts             []string
		served            bool
	}{{m.Secret, "controller-metrics", m.Hosts, true}, {m.SpeakerSecret, "speaker-metrics", m.SpeakerHosts, false}} {
		if k.secret == "" {
			continue
		}
		if len(k.hosts) == 0 {
			return fmt.Errorf("metrics certificate %s/%s: no host name", namespace, k.secret)
		}
		c := &webhook.Certs{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: namespace, SecretName: k.secret,
			Component: k.component, Policy: webhook.DefaultPolicy(k.hosts), Log: log.With("component", k.component)}
		if k.served {
			m.served.Store(c)
		}
		if err := mgr.Add(everyReplica(func(ctx context.Context) error { return c.Run(ctx, interval) })); err != nil {
			return err
		}
	}
	return nil
}

// AddFlags adds the metrics certificates' flags to fs (herald ccm's with
// the prefix herald-, as the webhook's). The returned function completes m
// once fs is parsed: each certificate names <service>.<namespace>.svc.
func (m *MetricsCerts) AddFlags(fs *flag.FlagSet, prefix string, namespace *string) func() error {
	fs.StringVar(&m.Secret, prefix+"metrics-cert-secret", m.Secret, "Secret in --namespace that holds the controller's metrics CA and certificate, which it serves (Herald manages it; \"\": a self-signed certificate)")
	service := fs.String(prefix+"metrics-service", "", "the controller's metrics Service in --namespace: its certificate names <service>.<namespace>.svc")
	fs.StringVar(&m.SpeakerSecret, prefix+"speaker-metrics-cert-secret", m.SpeakerSecret, "Secret in --namespace that holds the speakers' metrics CA and certificate, which they mount (Herald manages it; \"\": none)")
	speakerService := fs.String(prefix+"speaker-metrics-service", "", "the speakers' metrics Service in --namespace: their certificate names <service>.<namespace>.svc")
	return func() error {
		if *service != "" {
			m.Hosts = append(m.Hosts, *service+"."+*namespace+".svc")
		}
		if *speakerService != "" {
			m.SpeakerHosts = append(m.SpeakerHosts, *speakerService+"."+*namespace+".svc")
		}
		if m.Secret != "" && len(m.Hosts) == 0 {
			return fmt.Errorf("--%[1]smetrics-cert-secret needs --%[1]smetrics-service (the name of its certificate)", prefix)
		}
		if m.SpeakerSecret != "" && len(m.SpeakerHosts) == 0 {
			return fmt.Errorf("--%[1]sspeaker-metrics-cert-secret needs --%[1]sspeaker-metrics-service (the name of its certificate)", prefix)
		}
		return nil
	}
}
