# Herald — build, test, lint, generate, bench, and the local lab.
#
# Tools and built binaries are cached outside the checkout, keyed by version,
# so a second run is fast: $(HERALD_CACHE) (default ~/.cache/herald).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO ?= go
# NOCGO is the build configuration of everything that is not race-instrumented: vet, staticcheck, the non-race test
# runs, the binaries the tests build (internal/gobuild) and the lab's images (e2e/lab/lib/images.sh). One
# configuration, so that Go's build cache compiles each package once for all of them (a cold run compiled every
# dependency a second time for the lab's image: about 4 minutes on 2 cores).
NOCGO = CGO_ENABLED=0 GOFLAGS="-trimpath $(GOFLAGS)"
HERALD_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/herald
export HERALD_CACHE

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(HERALD_CACHE)/tools/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(HERALD_CACHE)/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

# shellcheck comes from Debian (install.sh lint installs it when missing).
SHELLCHECK ?= shellcheck
# promtool comes from Debian's prometheus package (install.sh lint installs it when missing).
PROMTOOL ?= promtool
SHELL_SCRIPTS := .ci/run cmd/kubectl-herald/krew.sh e2e/metallb/build.sh e2e/metallb/hostcheck.sh e2e/metallb/images.sh e2e/lab/lab e2e/lab/install.sh e2e/lab/herald-image.sh e2e/lab/lib_test.sh e2e/lab/failover-summary.sh e2e/lab/percentiles.sh e2e/lab/bgp-timing-summary.sh $(wildcard e2e/lab/lib/*.sh) \
  e2e/kind/kind.sh e2e/kind/lib.sh e2e/kind/cluster.sh e2e/kind/router/run.sh e2e/kind/node/entrypoint e2e/kind/node/setup.sh

# controller-gen writes the deepcopy functions next to the types and the CRDs into config/crd.
CONTROLLER_GEN_ARGS := object paths=./config/... crd paths=./config/... output:crd:artifacts:config=config/crd

.PHONY: all build test integration image image-archive chart-crds chart-lint chart-test bench-webhook bench-config bench-controller bench-cache bench-svclb bench-nllb bench-failover bench-bgp bench-migration bench-nud soak-members bench-members bench-members-short bench-scale bench-scale-short test-bfd-hook e2e e2e-nftables e2e-nllb e2e-ccm kind-image e2e-kind kind-up kind-down demo lab-install lab-up lab-down lab-status lint lint-shell generate verify-generated bench fuzz tools shellcheck kube-bin clean

all: lint test build

## build: the herald binary, herald-ccm (the cloud controller manager `herald ccm` runs) and the kubectl plugin
## kubectl-herald (copy it onto the PATH: `kubectl herald explain svc/NAME`), in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/herald ./cmd/herald-ccm ./cmd/kubectl-herald

## krew: the kubectl plugin's release archives (linux and darwin, amd64 and arm64) and the krew manifest that installs
## them, in KREW_OUT (default dist/krew); KREW_URL_BASE is where the archives are to be published
KREW_OUT ?= dist/krew
KREW_URL_BASE ?= https://github.com/herald-lb/herald/releases/download/$(VERSION)
.PHONY: krew krew-check
krew:
	./cmd/kubectl-herald/krew.sh $(KREW_OUT) $(VERSION) $(KREW_URL_BASE)

## krew-check: the manifest of `make krew` as krew reads it: validate-krew-manifest, then krew itself installs the
## host's archive from the file into a throwaway KREW_ROOT and the installed `kubectl-herald version` runs (krew
## $(KREW_VERSION) from the Go module proxy, cached)
KREW_VERSION := v0.4.3
KREW_TOOLS := $(HERALD_CACHE)/tools/krew-$(KREW_VERSION)
krew-check: krew
	@test -x $(KREW_TOOLS)/krew -a -x $(KREW_TOOLS)/validate-krew-manifest || \
	  GOBIN=$(KREW_TOOLS) $(GO) install sigs.k8s.io/krew/cmd/krew@$(KREW_VERSION) sigs.k8s.io/krew/cmd/validate-krew-manifest@$(KREW_VERSION)
	$(KREW_TOOLS)/validate-krew-manifest -skip-install -manifest $(KREW_OUT)/herald.yaml
	root=$$(mktemp -d) && trap 'rm -rf "$$root"' EXIT && \
	  KREW_ROOT=$$root $(KREW_TOOLS)/krew install --manifest=$(KREW_OUT)/herald.yaml \
	    --archive=$(KREW_OUT)/kubectl-herald_$$($(GO) env GOOS)_$$($(GO) env GOARCH).tar.gz && \
	  $$root/bin/kubectl-herald version

## test: unit tests with the race detector
test:
	$(GO) test -race -count=1 ./...

## test-bfd-hook: the BGP session manager's BFD hook against FRR (bgpd + bfdd) in namespaces (root): BFD_ROUNDS
## (default 3) silent path cuts with 300 ms x 3 and 50 ms x 3, each followed by the issue's 60 s without a flap;
## prints the cut -> route gone at FRR figures (lines BFD-HOOK)
BFD_ROUNDS ?= 3
test-bfd-hook:
	HERALD_BFD_STABLE=60s HERALD_BFD_ROUNDS=$(BFD_ROUNDS) $(GO) test -count=1 -timeout 30m -run '^TestBFDRouters$$' -v ./announce/bgp/ \
	  | grep -E 'BFD-HOOK|^(ok|FAIL|--- )|bfd_routers_test.go:[0-9]+: [^=t]'

## kube-bin: build (once, cached) the kube-apiserver and etcd the integration tests run, and helm (the chart tests)
kube-bin:
	./e2e/lab/install.sh k8s etcd helm

## metallb-bin: build (once, cached in $(HERALD_CACHE)/metallb-v0.16.2) MetalLB v0.16.2's controller and speaker from
## the Go module proxy, static, with the frr-k8s stand-in e2e/metallb/README.md describes; for the migration lab suite
.PHONY: metallb-bin
metallb-bin:
	./e2e/metallb/build.sh

## integration: controller, speaker, svclb DaemonSet, cleanup, Helm chart and herald ccm tests against a real kube-apiserver + etcd (with -race)
integration: kube-bin
	$(GO) test -race -tags integration -count=1 -timeout 20m ./config/crdtest/ ./controller/ ./speaker/ ./controller/svclb/ ./nllb/node/ ./controller/cleanup/ ./charts/ ./controller/ccm/ ./cmd/herald/

HELM ?= $(HERALD_CACHE)/helm-v3.22.0/bin/helm

## image-archive: Herald's image as a docker-archive tarball without Docker (IMAGE_OUT, default
## $(HERALD_CACHE)/images/herald.tar; IMAGE_TAG, default localhost/herald:dev): load it with ctr/docker/kind/k3s
IMAGE_OUT ?= $(HERALD_CACHE)/images/herald.tar
IMAGE_TAG ?= localhost/herald:dev
image-archive:
	./e2e/lab/herald-image.sh "$(IMAGE_OUT)" "$(IMAGE_TAG)"

## image: Herald's image with Docker (the Dockerfile: a static build, then only the binary), tagged IMAGE_TAG
## (default localhost/herald:dev), version and commit stamped; DOCKER_BUILD_ARGS adds options (e.g. --platform)
DOCKER ?= docker
DOCKER_BUILD_ARGS ?=
image:
	$(DOCKER) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) $(DOCKER_BUILD_ARGS) -t $(IMAGE_TAG) .

## chart-lint: helm lint of the chart, with the default values and with every mode on
chart-lint: kube-bin
	$(HELM) lint --strict $(CHART_DIR)
	$(HELM) lint --strict $(CHART_DIR) -f $(CHART_DIR)/ci/all-modes-values.yaml

## chart-test: helm lint, then the chart's tests against a real kube-apiserver: rendered objects accepted by a
## server-side dry run (default values and every mode), and the RBAC of each ServiceAccount by impersonation
chart-test: chart-lint
	$(GO) test -tags integration -count=1 -timeout 10m -v ./charts/

## bench-webhook: a burst of 200 configuration objects from 16 writers, every one judged by the admission webhook
## against the real API server: the API server's own count of reads of Herald's kinds, the create times the writers
## see and the webhook's answer times (lines WEBHOOK); then the webhook alone (BenchmarkAdmissionBurst)
bench-webhook: kube-bin
	$(GO) test -tags integration -count=1 -timeout 10m -run '^TestWebhookBurst$$' -v ./controller/ | grep -E 'WEBHOOK|^(ok|FAIL|---)'
	$(GO) test -run '^$$' -bench '^BenchmarkAdmissionBurst$$' -benchtime 20x ./controller/webhook/ | grep -E '^Benchmark|^(ok|FAIL)'

## bench-config: config.ParseKeepingLastValid of the largest objects the CRDs admit (one of each kind, then 10 and
## 100 such pools)
bench-config:
	$(GO) test -run '^$$' -bench '^BenchmarkParseLargest$$' -benchmem ./config/ | grep -E '^Benchmark|^(ok|FAIL)'

## bench-controller: 1,000 Services against the real API server; prints LOAD figures
bench-controller: kube-bin
	$(GO) test -tags integration -count=1 -timeout 20m -run '^TestLoad(Burst)?$$' -v ./controller/ | grep -E 'LOAD|^(ok|FAIL|---)'

## bench-cache: heap of the informer caches at 1,000 Nodes, 10,000 LoadBalancer Services and 10,000 EndpointSlices,
## whole and through the speaker's and the controller's transforms (internal/cachetrim), 3 runs; CACHE_SCALE=0.1 for
## a tenth of the sizes (under a second)
CACHE_SCALE ?= 1
bench-cache:
	$(GO) test -run '^$$' -bench '^BenchmarkInformerCache$$' -benchtime 1x -count 3 ./internal/cachetrim/ -args -cachetrim.scale=$(CACHE_SCALE) | grep -E '^Benchmark|^(ok|FAIL)'

## bench-svclb: the ServiceLB forwarder in test-made namespaces (root): one client's TCP throughput and round-trip
## time direct (routed, no NAT), through the nftables rules and through the userspace proxy. SVCLB_BENCH_ROUNDS
## (default 10) rounds of 1 s per path, the paths interleaved round by round (the machine may be shared); medians
## printed at the end, every round in SVCLB_BENCH_LOG
SVCLB_BENCH_ROUNDS ?= 10
SVCLB_BENCH_LOG ?= $${TMPDIR:-/tmp}/herald-bench-svclb.log
bench-svclb:
	$(GO) test -c -o "$${TMPDIR:-/tmp}/herald-svclb.test" ./svclb/
	for i in $$(seq $(SVCLB_BENCH_ROUNDS)); do \
	  "$${TMPDIR:-/tmp}/herald-svclb.test" -test.run '^$$' -test.bench '^BenchmarkForward$$' -test.benchtime 1s || exit 1; \
	done | tee "$(SVCLB_BENCH_LOG)" | grep -E '^BenchmarkForward/'
	awk -f svclb/bench_summary.awk "$(SVCLB_BENCH_LOG)"

## bench-nllb: the NLLB balancer (its own process) on loopback beside a direct connection and HAProxy in TCP mode
## (Debian haproxy, from install.sh apt; skipped when missing): one connection's bulk throughput (1 GiB) and p50/p99
## round-trip times of 64-byte exchanges over 1 and 64 connections. NLLB_BENCH_ROUNDS (default 3) rounds, the paths
## interleaved round by round; a Markdown table of the medians on stdout, every round on stderr
NLLB_BENCH_ROUNDS ?= 3
bench-nllb:
	$(GO) build -o "$${TMPDIR:-/tmp}/herald-benchnllb" ./nllb/internal/benchnllb
	"$${TMPDIR:-/tmp}/herald-benchnllb" -rounds $(NLLB_BENCH_ROUNDS)

## bench-failover: layer 2 failover in the lab, FAILOVER_RUNS rounds (default 20) per memberlist profile in
## FAILOVER_PROFILES (default: fast default): the longest gap in a UDP stream from the lan client (every 10 ms) for a
## killed speaker, a cut link and a graceful stop; p50/p99/max per profile and case
FAILOVER_RUNS ?= 20
FAILOVER_PROFILES ?= fast default
FAILOVER_LOG ?= $${TMPDIR:-/tmp}/herald-bench-failover.log
bench-failover:
	./e2e/lab/install.sh apt k8s etcd
	: > "$(FAILOVER_LOG)"
	for p in $(FAILOVER_PROFILES); do \
	  LAB_MEMBERLIST_PROFILE=$$p HERALD_E2E_FAILOVER_RUNS=$(FAILOVER_RUNS) $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 120m \
	    -run '^TestL2SpeakerAnswersAndFailsOver$$' -v ./e2e/ >> "$(FAILOVER_LOG)" 2>&1 || { tail -50 "$(FAILOVER_LOG)"; exit 1; }; \
	done
	grep -E 'FAILOVER' "$(FAILOVER_LOG)"
	./e2e/lab/failover-summary.sh "$(FAILOVER_LOG)"

## bench-migration: the live migration from MetalLB (TestMigrateFromMetalLB) MIGRATION_RUNS rounds (default 5) in
## one lab: each stream's longest silence (lan client to the L2 IPv4 and IPv6 addresses, the host behind FRR to the
## BGP address) while the speakers are swapped node by node; p50/p99/max per stream
MIGRATION_RUNS ?= 5
MIGRATION_LOG ?= $${TMPDIR:-/tmp}/herald-bench-migration.log
bench-migration:
	./e2e/lab/install.sh apt k8s etcd helm
	./e2e/metallb/build.sh >/dev/null
	HERALD_E2E_MIGRATION_RUNS=$(MIGRATION_RUNS) $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 120m \
	  -run '^TestMigrateFromMetalLB$$' -v ./e2e/ > "$(MIGRATION_LOG)" 2>&1 || { tail -50 "$(MIGRATION_LOG)"; exit 1; }
	grep -E '^MIGRATION' "$(MIGRATION_LOG)" | cut -f2- | sed 's/^/longest silence, /' | ./e2e/lab/percentiles.sh

## bench-bgp: BGP timings in the lab at the routers' RIBs, BGP_RUNS rounds (default 20) with a 3 s hold time,
## BGP_LONG_RUNS rounds (default 3) with the 90 s default, and BGP_BFD_RUNS rounds (default 20) with a 9 s hold time
## and BFD at FRR for each profile in BGP_BFD_PROFILES (<interval ms>x<multiplier>, default 300x3 50x3): new
## Service -> route and first answer; SIGTERM, kill -9 and link cut -> the node's path gone; p50/p99/max per case
## and router. A count of 0 skips that part.
BGP_RUNS ?= 20
BGP_LONG_RUNS ?= 3
BGP_BFD_RUNS ?= 20
BGP_BFD_PROFILES ?= 300x3 50x3
BGP_LOG ?= $${TMPDIR:-/tmp}/herald-bench-bgp.log
bench-bgp:
	./e2e/lab/install.sh apt k8s etcd
	: > "$(BGP_LOG)"
	for spec in 3s:$(BGP_RUNS) 90s:$(BGP_LONG_RUNS); do \
	  [ "$${spec##*:}" -gt 0 ] || continue; \
	  HERALD_E2E_BGP_HOLD=$${spec%%:*} HERALD_E2E_BGP_RUNS=$${spec##*:} $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 120m \
	    -run '^TestBGPTiming$$' -v ./e2e/ >> "$(BGP_LOG)" 2>&1 || { tail -50 "$(BGP_LOG)"; exit 1; }; \
	done
	for bfd in $(BGP_BFD_PROFILES); do \
	  [ "$(BGP_BFD_RUNS)" -gt 0 ] || continue; \
	  HERALD_E2E_BGP_BFD=$$bfd HERALD_E2E_BGP_RUNS=$(BGP_BFD_RUNS) $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 120m \
	    -run '^TestBGPTimingBFD$$' -v ./e2e/ >> "$(BGP_LOG)" 2>&1 || { tail -50 "$(BGP_LOG)"; exit 1; }; \
	done
	./e2e/lab/bgp-timing-summary.sh "$(BGP_LOG)"

## bench-nud: the lan client's neighbour entries under unreachability detection, NUD_SECONDS (default 180) of
## one-way UDP to an IPv4 and an IPv6 L2 address with the kernel's own timers: no FAILED entry and no datagram lost
NUD_SECONDS ?= 180
bench-nud:
	./e2e/lab/install.sh apt k8s etcd
	HERALD_E2E_NUD_SECONDS=$(NUD_SECONDS) HERALD_E2E_NUD_REACHABLE_MS=0 $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 60m \
	  -run '^TestL2NeighbourSurvivesUnreachabilityDetection$$' -v ./e2e/ | grep -E 'NUD|^(ok|FAIL|---)|l2_nud_test'

## soak-members: SOAK_SECONDS (default 600) of an idle lab with the speakers (LAB_MEMBERLIST_PROFILE, default
## fast): no speaker may declare another dead
SOAK_SECONDS ?= 600
soak-members:
	./e2e/lab/install.sh apt k8s etcd
	HERALD_E2E_SOAK_SECONDS=$(SOAK_SECONDS) $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 60m \
	  -run '^TestMemberlistIdleHasNoFalsePositives$$' -v ./e2e/ | grep -E 'SOAK|^(ok|FAIL|---)|members_soak_test'

## bench-members: memberlist at size (docs/benchmarks.md, "Memberlist at size"; no root, no lab): for each size in
## MEMBERS_N (default 10 50 100 250) and profile in MEMBERS_PROFILES (default fast default), that many real
## speaker/members members, each a process of its own (GOMAXPROCS MEMBERS_GOMAXPROCS, default 1) on a loopback address
## of its own: false detections in MEMBERS_IDLE (default 1m) idle and MEMBERS_BURN (default 1m) beside two CPU
## burners, bytes sent and CPU per member, then MEMBERS_KILLS (default 6) kill -9 -> every member sees it dead. Two
## tables at the end (20-30 min), everything in MEMBERS_LOG. Fails on a false detection idle or a kill not detected
## in a group of up to 25 members per 2 cores (larger groups share the cores too much: reported, not failed).
## The figures in docs/benchmarks.md: MEMBERS_N="10 25 50 100 250" MEMBERS_IDLE=10m MEMBERS_BURN=10m MEMBERS_KILLS=12.
## bench-members-short: the CI's version (~2 min): the chart's profile (fast) at N = 10 and 25 (a tenth of the
## sizes), 30 s idle, no burners, 2 kills; fails on a false detection or a kill not seen by every member
MEMBERS_N ?= 10 50 100 250
MEMBERS_PROFILES ?= fast default
MEMBERS_IDLE ?= 1m
MEMBERS_BURN ?= 1m
MEMBERS_KILLS ?= 6
MEMBERS_GOMAXPROCS ?= 1
MEMBERS_LOG ?= $${TMPDIR:-/tmp}/herald-bench-members.log
bench-members:
	$(NOCGO) $(GO) test -c -o "$${TMPDIR:-/tmp}/herald-members.test" ./speaker/members/
	cd speaker/members && "$${TMPDIR:-/tmp}/herald-members.test" -test.run '^TestMembersAtSize$$' -test.v -test.timeout 0 \
	  -members.atsize-n "$(MEMBERS_N)" -members.atsize-profiles "$(MEMBERS_PROFILES)" -members.atsize-idle $(MEMBERS_IDLE) \
	  -members.atsize-burn $(MEMBERS_BURN) -members.atsize-kills $(MEMBERS_KILLS) \
	  -members.atsize-gomaxprocs $(MEMBERS_GOMAXPROCS) 2>&1 | tee "$(MEMBERS_LOG)"
bench-members-short:
	$(MAKE) --no-print-directory bench-members MEMBERS_N="10 25" MEMBERS_PROFILES=fast MEMBERS_IDLE=30s MEMBERS_BURN=0 MEMBERS_KILLS=2

## bench-scale: the real controller and one real speaker (processes, default flags; the speaker in a network
## namespace with SCALE_PEERS (4) gobgpd routers) against a real API server holding SCALE_NODES (1000) realistic Nodes and
## SCALE_SERVICES (10000) LoadBalancer Services with EndpointSlices; idle, then SCALE_CHURN (5m) of 100 EndpointSlice
## updates/s and of 50 Node heartbeats/s, SCALE_MOVES (20) announcement moves timed at a router, a burst of
## SCALE_BURST (1000) creates from 16 writers, a controller restart during a tenth of that; lines SCALE
## (docs/benchmarks.md, "Scale"). Root.
## SCALE_SPEAKER_GOMEMLIMIT (e.g. 230MiB) gives the speaker the soft memory limit a container limit would.
## bench-scale-short: a tenth of the sizes (100 nodes, 1,000 Services, 30 s of churn, 100 creates), as CI runs it
SCALE_NODES ?= 1000
SCALE_SERVICES ?= 10000
SCALE_CHURN ?= 5m
SCALE_BURST ?= 1000
SCALE_MOVES ?= 20
SCALE_PEERS ?= 4
SCALE_SPEAKER_GOMEMLIMIT ?=
SCALE_LOG ?= $${TMPDIR:-/tmp}/herald-bench-scale.log
bench-scale: kube-bin
	./e2e/lab/install.sh apt
	SCALE_NODES=$(SCALE_NODES) SCALE_SERVICES=$(SCALE_SERVICES) SCALE_CHURN=$(SCALE_CHURN) SCALE_BURST=$(SCALE_BURST) \
	  SCALE_MOVES=$(SCALE_MOVES) SCALE_PEERS=$(SCALE_PEERS) SCALE_SPEAKER_GOMEMLIMIT=$(SCALE_SPEAKER_GOMEMLIMIT) $(NOCGO) $(GO) test -tags scale -count=1 -timeout 120m -run '^(TestScale|TestRouteMonitorMissesNothing)$$' -v ./bench/scale/ \
	  > "$(SCALE_LOG)" 2>&1 || { tail -60 "$(SCALE_LOG)"; exit 1; }
	grep -E '^SCALE' "$(SCALE_LOG)" | cut -f2-
	sed -n '/^PROFILE/,/^$$/p' "$(SCALE_LOG)"
bench-scale-short:
	$(MAKE) --no-print-directory bench-scale SCALE_NODES=100 SCALE_SERVICES=1000 SCALE_CHURN=30s SCALE_BURST=100 SCALE_MOVES=10

## demo: bring up the local lab (installs and builds what is missing) and show a LoadBalancer Service answering
demo:
	./e2e/lab/lab demo

## e2e: the end-to-end suites in the lab (they bring the lab up and down themselves; root), the live migration from
## MetalLB among them (one round; MetalLB built by make metallb-bin, cached); verbose, the log also in E2E_LOG, and
## the suites sorted by duration at the end
E2E_LOG ?= $${TMPDIR:-/tmp}/herald-e2e.log
e2e:
	./e2e/lab/install.sh apt k8s etcd helm
	./e2e/metallb/build.sh >/dev/null
	@rc=0; $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 30m -v ./e2e/... 2>&1 | tee "$(E2E_LOG)" || rc=$$?; \
	  echo "e2e: the suites by duration (the lab's own steps above, as [ Ns] lines):"; \
	  grep -E '^--- (PASS|FAIL|SKIP)' "$(E2E_LOG)" | sed -E 's/^--- ([A-Z]+): ([^ ]+) \(([0-9.]+)s\)/\3 \1 \2/' | sort -rn | \
	    awk '{ printf "  %7.1fs  %s %s\n", $$1, $$2, $$3; sum += $$1 } END { printf "  %7.1fs  in all\n", sum }'; \
	  exit $$rc

## e2e-nftables: the suites that check what an announced address reaches (L2 with one failover round, BGP, the
## dual-stack data path) in a lab whose kube-proxy runs in nftables mode (LAB_KUBE_PROXY_MODE=nftables). A running
## lab is taken down first.
e2e-nftables:
	./e2e/lab/install.sh apt k8s etcd helm
	./e2e/lab/lab down >/dev/null
	LAB_KUBE_PROXY_MODE=nftables HERALD_E2E_FAILOVER_RUNS=1 $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 20m \
		-run '^(TestL2SpeakerAnswersAndFailsOver|TestBGPSpeakerAdvertises|TestDualStackThroughKubeProxy)$$' -v ./e2e/

## e2e-nllb: the NLLB suite (TestNLLB) in a lab of its own: three kube-apiservers on one etcd, every node's kubelet
## and kube-proxy through `herald nllb` (LAB_APISERVERS=3 LAB_NLLB=1). A running lab is taken down first.
e2e-nllb:
	./e2e/lab/install.sh apt k8s etcd helm
	./e2e/lab/lab down >/dev/null
	LAB_APISERVERS=3 LAB_NLLB=1 $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 20m -run '^TestNLLB$$' -v ./e2e/

## e2e-ccm: the cloud-controller suite (TestCCM) in a lab of its own whose node 3 runs its kubelet with
## --cloud-provider=external (LAB_EXTERNAL_CLOUD_NODES=3); herald ccm installed by the chart. A running lab is taken
## down first.
e2e-ccm:
	./e2e/lab/install.sh apt k8s etcd helm
	./e2e/lab/lab down >/dev/null
	LAB_EXTERNAL_CLOUD_NODES=3 $(NOCGO) $(GO) test -tags e2e -count=1 -timeout 20m -run '^TestCCM$$' -v ./e2e/

## kind-image: everything a kind cluster needs, built offline and cached by version under $(HERALD_CACHE): Docker
## (Debian docker.io, dockerd started in the background when none runs), the kind CLI, kubeadm and the other
## Kubernetes binaries, a Debian base (debootstrap), the node image, the GoBGP router image; per-phase timings.
## A second run only checks the cache. KIND_NODE_IMAGE=published skips the node image (kind pulls its own).
kind-image:
	./e2e/kind/kind.sh image

## e2e-kind: a kind cluster (1 control plane + 2 workers; KIND_FAMILY=ipv4, the default, or dual) with Herald
## installed by helm install of charts/herald, a GoBGP router and client containers; the e2e suites against it
## (HERALD_E2E_CLUSTER=kind); everything removed again, also on failure (KIND_KEEP=1 keeps it). Per-phase timings.
e2e-kind:
	./e2e/kind/kind.sh e2e

kind-up:
	./e2e/kind/kind.sh up
kind-down:
	./e2e/kind/kind.sh down

lab-install:
	./e2e/lab/install.sh
lab-up:
	./e2e/lab/lab up
lab-down:
	./e2e/lab/lab down
lab-status:
	./e2e/lab/lab status

## lint: gofmt, go vet, staticcheck, the tools-tag build, generated files current, shellcheck and the lab
## library's tests, the chart's alerts checked by promtool. It changes nothing in the working tree.
lint: verify-generated lint-shell alerts-check $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(NOCGO) $(GO) vet -tags e2e,integration,scale ./...
	$(NOCGO) $(STATICCHECK) -tags e2e,integration,scale ./...

## lint-shell: shellcheck the scripts, and test the lab library (a failing command fails a step; PID checks)
lint-shell: shellcheck
	$(SHELLCHECK) -x -P SCRIPTDIR $(SHELL_SCRIPTS)
	./e2e/lab/lib_test.sh

## alerts-check: the chart's alerts with Prometheus's own tooling: the PrometheusRule as helm template renders it
## (metrics.prometheusRule.enabled, default values), its rule groups checked (promtool check rules) and unit-tested
## (promtool test rules, charts/herald/tests/alerts_test.yaml: each alert fires on broken series and not on healthy
## ones); the rules rendered with a runbook URL and no ignored reason checked too
.PHONY: alerts-check promtool
alerts-check: promtool
	@[ -x $(HELM) ] || ./e2e/lab/install.sh helm
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  rules() { $(HELM) template herald $(CHART_DIR) --namespace herald-system --set metrics.prometheusRule.enabled=true "$$@" \
	    --show-only templates/prometheusrule.yaml | awk '/^spec:$$/ {on = 1; next} on {sub(/^  /, ""); print}'; }; \
	  rules > "$$tmp/herald-rules.yaml"; \
	  rules --set metrics.prometheusRule.runbookBaseURL=https://example.org/alerts.md \
	    --set-json 'metrics.prometheusRule.alerts.addressNotAnnounced.ignoreReasons=[]' > "$$tmp/variant-rules.yaml"; \
	  grep -q 'alert: ' "$$tmp/herald-rules.yaml" || { echo "alerts-check: no alert rendered"; exit 1; }; \
	  cp $(CHART_DIR)/tests/alerts_test.yaml "$$tmp/"; \
	  $(PROMTOOL) check rules "$$tmp/herald-rules.yaml" "$$tmp/variant-rules.yaml"; \
	  $(PROMTOOL) test rules "$$tmp/alerts_test.yaml"

## generate: deepcopy functions and CRD manifests from config/v1beta1, and the chart's copy of the CRDs
generate: $(CONTROLLER_GEN)
	rm -rf config/crd
	$(CONTROLLER_GEN) $(CONTROLLER_GEN_ARGS)
	$(MAKE) --no-print-directory chart-crds

# The Helm chart installs the CRDs from its crds/ directory: a copy of config/crd, the one source of truth.
CHART_DIR := charts/herald

## chart-crds: copy the generated CRDs (config/crd) into the chart (charts/herald/crds)
chart-crds:
	rm -rf $(CHART_DIR)/crds
	mkdir -p $(CHART_DIR)/crds
	cp config/crd/*.yaml $(CHART_DIR)/crds/

## verify-generated: fail when `make generate` would change anything. It generates into a copy of the module's
## config/ tree (and internal/, which config imports) in a temporary directory and compares; the working tree is only read.
verify-generated: $(CONTROLLER_GEN)
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  cp go.mod go.sum "$$tmp/"; cp -R config "$$tmp/config"; cp -R internal "$$tmp/internal"; \
	  (cd "$$tmp" && rm -rf config/crd && $(CONTROLLER_GEN) $(CONTROLLER_GEN_ARGS)); \
	  if ! diff -r config "$$tmp/config" >"$$tmp/diff"; then \
	    echo "generated files are stale; run 'make generate' and commit:"; cat "$$tmp/diff"; exit 1; fi; \
	  if ! diff -r "$$tmp/config/crd" $(CHART_DIR)/crds >"$$tmp/diff"; then \
	    echo "the chart's CRDs ($(CHART_DIR)/crds) differ from the generated ones; run 'make generate' and commit:"; cat "$$tmp/diff"; exit 1; fi

## bench: allocator benchmarks on one core
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 ./ipam/
	$(GO) test -run '^$$' -bench '^BenchmarkParseAnd' -benchmem -cpu 1 ./announce/arp/ ./announce/ndp/

## fuzz: run every fuzz target for FUZZTIME (default 60s) each: the parsers of outside input (configuration objects,
## the objects the CRD schemas admit, Service annotations, the svclb environment, the tolerations annotation, the NLLB
## upstream file and EndpointSlices, the webhook's requests, ARP/NDP/BFD packets, the kubeconfig patch, herald
## migrate's input, the ccm's node keys, a tenant's svclb annotations, memberlist metadata, the sharing annotation,
## the terminal and UTF-8 escapes) and the allocator and planner. TestFuzzTargetsListed keeps this list whole. `make test` runs their committed corpora (testdata/fuzz); FUZZ_CORPUS=1 copies what a run
## found into them. FUZZMINIMIZETIME bounds the minimizing of each new input (Go's default is 60s, and its progress
## line counts a minimization's runs only when it ends: FuzzMigrate's large YAML inputs showed "0/sec" for up to a
## minute and found 9 new inputs in 120s, against 136 with 5s).
FUZZTIME ?= 60s
FUZZMINIMIZETIME ?= 5s
FUZZ_TARGETS := ./config:FuzzParse ./config/crdtest:FuzzSchemaObjects ./ipam:FuzzParseRequest ./ipam:FuzzAllocator \
  ./svclb:FuzzParseEnv ./controller/svclb:FuzzTolerations ./nllb:FuzzParseUpstreams ./nllb/discovery:FuzzUpstreams \
  ./nllb/kubeconfig:FuzzPatch ./controller/webhook:FuzzReview ./speaker/plan:FuzzCompute ./announce/arp:FuzzARPParse \
  ./announce/ndp:FuzzNDPParse ./announce/bfd:FuzzParse ./announce/bfd:FuzzSession ./config/svcstatus:FuzzParseSharing \
  ./internal/utf8text:FuzzEscape ./internal/termsafe:FuzzEscape ./internal/termsafe:FuzzMarshal ./config/metallb:FuzzMigrate \
  ./controller/ccm:FuzzNodeAddresses ./controller/svclb:FuzzBuild ./speaker/members:FuzzMeta
fuzz:
	for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg || exit 1; \
	  if [ -n "$${FUZZ_CORPUS:-}" ]; then \
	    src="$$($(GO) env GOCACHE)/fuzz/github.com/herald-lb/herald/$${pkg#./}/$$name"; \
	    if [ -d "$$src" ]; then mkdir -p "$$pkg/testdata/fuzz/$$name" && cp -n "$$src"/* "$$pkg/testdata/fuzz/$$name/"; fi; \
	  fi; \
	done

tools: $(CONTROLLER_GEN) $(STATICCHECK) shellcheck promtool

## shellcheck: install shellcheck (a Debian package) if it is missing
shellcheck:
	@command -v $(SHELLCHECK) >/dev/null || ./e2e/lab/install.sh lint

## promtool: install promtool (Debian's prometheus package) if it is missing
promtool:
	@command -v $(PROMTOOL) >/dev/null || ./e2e/lab/install.sh lint

$(CONTROLLER_GEN):
	GOBIN=$(dir $@) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

$(STATICCHECK):
	GOBIN=$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

clean:
	rm -rf bin
