#!/usr/bin/env bash
# Builds MetalLB v0.16.2's `controller` and `speaker` from the Go module proxy, offline from any container registry,
# as static binaries (CGO_ENABLED=0, -trimpath), cached by version:
#
#   ${HERALD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/herald}/metallb-v0.16.2/
#     controller, speaker      the binaries
#     crds/                    MetalLB's nine CRDs (config/crd/bases of the module)
#     crd-patches/             the kustomize patch that gives bgppeers.metallb.io its conversion webhook
#     metallb-native.yaml      MetalLB's rendered native-mode manifest (config/manifests of the module)
#     BUILDINFO                versions, flags, the stand-in's checksum, sha256 of both binaries, timings
#
# When both binaries are there it does nothing (METALLB_REBUILD=1 builds again). It works in a temporary directory
# outside the checkout: a copy of MetalLB's module (go.universe.tf/metallb v0.16.2) whose go.mod replaces
# github.com/metallb/frr-k8s — v0.0.27, which the proxy refuses to serve — with a copy of v0.0.26 patched with the
# stand-in in _standin/ (see README.md). The last line on stdout is the cache directory; progress goes to stderr.
#
# Environment: HERALD_CACHE, GO (default go), METALLB_REBUILD=1, METALLB_KEEP_WORK=1 (keep the temporary directory
# and say where), METALLB_BUILD_NICE (default 10: the niceness of the compile), GOCACHE/GOMODCACHE/GOPROXY as for any
# go build.
set -euo pipefail

METALLB_MODULE=go.universe.tf/metallb
METALLB_VERSION=v0.16.2
FRRK8S_MODULE=github.com/metallb/frr-k8s
FRRK8S_BASE=v0.0.26 # the newest frr-k8s the proxy serves; MetalLB v0.16.2 asks for v0.0.27

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
standin=$here/_standin/aspathprepend.go
cache=${HERALD_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/herald}
out=$cache/metallb-$METALLB_VERSION
GO=${GO:-go}
nice_level=${METALLB_BUILD_NICE:-10}

now_ms() { local t=${EPOCHREALTIME//[!0-9]/}; echo $((t / 1000)); }
t_start=$(now_ms)
t_step=$t_start
secs() { local ms=$1; printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100)); }
say() { printf '[metallb-build %6ss] %s\n' "$(secs $(($(now_ms) - t_start)))" "$*" >&2; }
die() {
	say "ERROR: $*"
	exit 1
}
# step_done WHAT: say WHAT with the time since the last step_done, and remember that time for BUILDINFO.
timings=()
step_done() {
	local n d
	n=$(now_ms)
	d=$(secs $((n - t_step)))
	t_step=$n
	timings+=("$1: ${d}s")
	say "$1 (${d}s)"
}

have_binaries() { [ -x "$out/controller" ] && [ -x "$out/speaker" ]; }

if [ "${METALLB_REBUILD:-}" != 1 ] && have_binaries; then
	say "cached: $out/controller and $out/speaker exist (MetalLB $METALLB_VERSION); nothing to do (METALLB_REBUILD=1 rebuilds)"
	echo "$out"
	exit 0
fi

command -v "$GO" >/dev/null || die "no Go toolchain ($GO) on PATH"
[ -f "$standin" ] || die "the stand-in $standin is missing"
mkdir -p "$cache"

# One build at a time per version: a second caller waits, then finds the binaries.
exec 9>"$cache/metallb-$METALLB_VERSION.lock"
flock 9
if [ "${METALLB_REBUILD:-}" != 1 ] && have_binaries; then
	say "cached: another build finished while this one waited for the lock"
	echo "$out"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/herald-metallb-build.XXXXXX")
cleanup() {
	chmod -R u+w "$work" 2>/dev/null || true # copies of the module cache are read-only
	if [ "${METALLB_KEEP_WORK:-}" = 1 ]; then
		say "work dir kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
say "building MetalLB $METALLB_VERSION controller and speaker into $out (work dir $work, $("$GO" version))"

# ---- 1. sources from the Go module proxy (or the module cache), checked against go.sum / the checksum database
module_dir() {
	local json dir
	json=$(cd "$work" && "$GO" mod download -json "$1@$2") || die "go mod download $1@$2 failed: $json"
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	[[ -n $dir && -d $dir ]] || die "go mod download $1@$2 named no directory: $json"
	echo "$dir"
}
metallb_src=$(module_dir "$METALLB_MODULE" "$METALLB_VERSION")
frrk8s_src=$(module_dir "$FRRK8S_MODULE" "$FRRK8S_BASE")
step_done "sources: $metallb_src, $frrk8s_src"

cp -R "$metallb_src" "$work/metallb"
cp -R "$frrk8s_src" "$work/frr-k8s"
chmod -R u+w "$work/metallb" "$work/frr-k8s"

# ---- 2. the stand-in: frr-k8s v0.0.26 plus the AS-path-prepend type and field MetalLB v0.16.2 uses
api=$work/frr-k8s/api/v1beta1
grep -q 'AsPathPrepend' "$api"/*.go && die "$FRRK8S_MODULE@$FRRK8S_BASE already declares AsPathPrepend: the stand-in is not needed"
install -m 0644 "$standin" "$api/zz_herald_standin.go"
# insert_after FILE AFTER_REGEX LINE [WITHIN_REGEX]: add LINE after the one line matching AFTER_REGEX (after the
# first match following a line matching WITHIN_REGEX, if given); fail unless exactly one line was added.
insert_after() {
	local file=$1 after=$2 line=$3 within=${4:-} n
	# (through the environment: awk -v would interpret the backslashes in the regular expressions)
	AFTER=$after LINE=$line WITHIN=$within awk '
		BEGIN { after = ENVIRON["AFTER"]; line = ENVIRON["LINE"]; within = ENVIRON["WITHIN"]; armed = (within == ""); n = 0 }
		{ print }
		within != "" && $0 ~ within { armed = 1; next }
		armed && $0 ~ after { print line; n++; if (within != "") armed = 0 }
		END { print n > "/dev/stderr" }
	' "$file" >"$file.new" 2>"$file.count"
	n=$(cat "$file.count")
	rm -f "$file.count"
	[ "$n" = 1 ] || die "patching $file: '$after' matched $n times, want 1 ($FRRK8S_MODULE@$FRRK8S_BASE changed?)"
	mv "$file.new" "$file"
}
# The field, at the end of Advertise (after PrefixesWithCommunity, the last field in v0.0.26).
insert_after "$api/frrconfiguration_types.go" \
	'^[[:space:]]PrefixesWithCommunity[[:space:]]+\[\]CommunityPrefixes[[:space:]]' \
	$'\n\t// PrefixesWithAsPathPrepend: prefixes advertised with a prepended AS path (Herald lab stand-in, see zz_herald_standin.go).\n\t// +optional\n\tPrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"`'
# Its deep copy, in the generated Advertise.DeepCopyInto.
insert_after "$api/zz_generated.deepcopy.go" \
	'^[[:space:]]\*out = \*in$' \
	$'\tout.PrefixesWithAsPathPrepend = heraldStandinCopyAsPathPrepend(in.PrefixesWithAsPathPrepend)' \
	'^func \(in \*Advertise\) DeepCopyInto\(out \*Advertise\) \{$'
unformatted=$(gofmt -l "$api")
[ -z "$unformatted" ] || die "the patched $api is not gofmt-clean: $unformatted"

# MetalLB's go.mod: frr-k8s from the patched copy; no `toolchain go1.26.9` line, so that any local Go >= 1.26.0
# (its `go` line) builds it instead of fetching another toolchain.
(cd "$work/metallb" && "$GO" mod edit -replace="$FRRK8S_MODULE=../frr-k8s" -toolchain=none)
step_done "prepared the module copy and the frr-k8s stand-in"

# ---- 3. build (go.sum is MetalLB's own: -mod=readonly refuses anything it does not pin)
ldflags="-s -w"
ldflags+=" -X $METALLB_MODULE/internal/version.gitCommit=module-proxy-$METALLB_VERSION"
ldflags+=" -X $METALLB_MODULE/internal/version.gitBranch=herald-lab-frr-k8s-$FRRK8S_BASE-standin"
mkdir -p "$work/bin"
(cd "$work/metallb" && CGO_ENABLED=0 nice -n "$nice_level" "$GO" build -mod=readonly -trimpath -buildvcs=false \
	-ldflags="$ldflags" -o "$work/bin/" ./controller ./speaker) || die "go build of ./controller ./speaker failed"
step_done "compiled controller and speaker"

# ---- 4. check: static, and each runs (flag's -help prints the flags and exits 0)
for b in controller speaker; do
	info=$("$GO" version -m "$work/bin/$b")
	grep -q 'CGO_ENABLED=0' <<<"$info" || die "$b was not built with CGO_ENABLED=0: $info"
	help=$("$work/bin/$b" --help 2>&1) || die "$b --help failed: $help"
	case $b in
	controller) want=ml-secret-name ;;
	speaker) want=node-name ;;
	esac
	grep -q -- "-$want" <<<"$help" || die "$b --help does not list -$want: $help"
done
step_done "checked: both static (CGO_ENABLED=0) and both answer --help"

# ---- 5. install into the cache (a staged directory renamed into place)
stage=$cache/.metallb-$METALLB_VERSION.stage
rm -rf "$stage"
mkdir -p "$stage/crds" "$stage/crd-patches"
install -m 0755 "$work/bin/controller" "$work/bin/speaker" "$stage/"
install -m 0644 "$work/metallb/config/crd/bases/"*.yaml "$stage/crds/"
# A kustomize patch, not an object: kept apart so that `kubectl apply -f crds/` cannot merge it into bgppeers.
install -m 0644 "$work/metallb/config/crd/patches/crd-conversion-patch-bgppeers.yaml" "$stage/crd-patches/"
install -m 0644 "$work/metallb/config/manifests/metallb-native.yaml" "$stage/"
step_done "installed"
{
	echo "metallb: $METALLB_MODULE@$METALLB_VERSION"
	echo "frr-k8s: $FRRK8S_MODULE@$FRRK8S_BASE + stand-in (sha256 $(sha256sum "$standin" | cut -d' ' -f1))"
	echo "go: $("$GO" version)"
	echo "flags: CGO_ENABLED=0 go build -mod=readonly -trimpath -buildvcs=false -ldflags='$ldflags'"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), niceness $nice_level, GOCACHE $("$GO" env GOCACHE)"
	(cd "$stage" && sha256sum controller speaker) | sed 's/^/sha256: /'
	for t in "${timings[@]}"; do echo "time: $t"; done
	echo "time total: $(secs $(($(now_ms) - t_start)))s"
} >"$stage/BUILDINFO"
rm -rf "$out"
mv -T "$stage" "$out"
say "done in $(secs $(($(now_ms) - t_start)))s: $out/controller ($(du -h "$out/controller" | cut -f1)), $out/speaker ($(du -h "$out/speaker" | cut -f1))"
echo "$out"
