#!/usr/bin/env bash
# krew.sh OUT_DIR VERSION URL_BASE: the kubectl plugin's release archives for krew, one per platform
# (kubectl-herald_<os>_<arch>.tar.gz, the binary and the README inside), and the krew manifest herald.yaml that
# installs them from URL_BASE/<archive> with their sha256. `kubectl krew install --manifest OUT_DIR/herald.yaml`
# installs from the URLs; with `--archive OUT_DIR/<archive>` from the file (make krew-check does that).
set -euo pipefail

out=${1:?usage: krew.sh OUT_DIR VERSION URL_BASE}
version=${2:?usage: krew.sh OUT_DIR VERSION URL_BASE}
base=${3:?usage: krew.sh OUT_DIR VERSION URL_BASE}
# krew wants a semantic version with a leading v: a build between tags (git describe gives a commit) becomes a
# pre-release of v0.0.0.
case $version in
v[0-9]*) ;;
*) version=v0.0.0-$version ;;
esac
repo=$(cd "$(dirname "$0")/../.." && pwd)
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
platforms=${KREW_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}

mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

{
	cat <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: herald
spec:
  version: ${version}
  homepage: https://github.com/herald-lb/herald
  shortDescription: Explain why a LoadBalancer Service is or is not served by Herald
  description: |
    kubectl herald explain svc/NAME prints the cause first: the Service's address and pool or why it has
    none, for each address which node announces it (ARP/NDP or BGP) and why every other node does not,
    the BGP sessions of the advertising nodes, and the Service's recent warnings. kubectl herald status
    prints the pools' use, the Services waiting for an address, the addresses nobody announces, each
    node's speaker and the configuration objects with problems. It reads what Herald publishes in the
    API and runs Herald's planner on it; it scrapes no log.
  platforms:
YAML
	for p in $platforms; do
		os=${p%/*} arch=${p#*/}
		archive="kubectl-herald_${os}_${arch}.tar.gz"
		rm -rf "${stage:?}/$p" && mkdir -p "$stage/$p"
		(cd "$repo" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
			-ldflags "-s -w -X main.version=$version -X main.commit=$commit" -o "$stage/$p/kubectl-herald" ./cmd/kubectl-herald)
		cp "$repo/README.md" "$stage/$p/README.md"
		# A reproducible archive: fixed order, owner and times.
		tar -C "$stage/$p" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - kubectl-herald README.md |
			gzip -n >"$out/$archive"
		sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
		cat <<YAML
  - selector:
      matchLabels:
        os: ${os}
        arch: ${arch}
    uri: ${base}/${archive}
    sha256: ${sum}
    bin: kubectl-herald
    files:
    - from: kubectl-herald
      to: .
    - from: README.md
      to: .
YAML
	done
} >"$out/herald.yaml"
echo "wrote $out/herald.yaml and $(echo "$platforms" | wc -w) archives"
