#!/usr/bin/env bash
# images.sh: MetalLB v0.16.2's controller and speaker as single-layer docker-archive tarballs, tagged with the
# references MetalLB's own metallb-native.yaml uses (quay.io/metallb/{controller,speaker}:v0.16.2), so that the
# kubelet finds them on the node (pull policy IfNotPresent) and never contacts the registry. Built from the
# binaries make metallb-bin cached, with the lab's image_archive, into <cache>/metallb-v0.16.2/images/, and rebuilt
# only when a binary is newer than its tarball. The last line on stdout is the images directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lab/lib/common.sh
source "$here/../lab/lib/common.sh"
# shellcheck source=../lab/lib/images.sh
source "$here/../lab/lib/images.sh"

dir=$HERALD_CACHE/metallb-v0.16.2
for b in controller speaker; do
	[ -x "$dir/$b" ] || die "no MetalLB $b in $dir: run make metallb-bin (e2e/metallb/build.sh)"
done
mkdir -p "$dir/images"
for b in controller speaker; do
	tar=$dir/images/$b.tar
	if [ ! -s "$tar" ] || [ "$dir/$b" -nt "$tar" ]; then
		image_archive "$tar" "quay.io/metallb/$b:v0.16.2" "$dir/$b" "/$b"
		log "built $tar"
	fi
done
echo "$dir/images"
