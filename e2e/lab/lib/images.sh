# shellcheck shell=bash
# Container images built without Docker: a static Go binary in a single-layer docker-archive tarball (plain tar
# and sha256sum), imported into every node's containerd with `ctr images import`.

IMAGE_CACHE=$HERALD_CACHE/lab-images

# image_archive OUT TAG BINARIES ENTRYPOINT...: write a docker-archive with each of BINARIES (comma-separated) as
# /<basename> in one layer.
image_archive() {
	local out=$1 tag=$2 bins=$3; shift 3
	local w layer_sha config_sha entry="" a b names=()
	w=$(mktemp -d)
	mkdir -p "$w/rootfs" "$w/out"
	IFS=, read -ra bins <<<"$bins"
	for b in "${bins[@]}"; do
		install -m 0755 "$b" "$w/rootfs/$(basename "$b")"
		names+=("$(basename "$b")")
	done
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w/rootfs" -cf "$w/layer.tar" "${names[@]}"
	layer_sha=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
	mkdir -p "$w/out/$layer_sha"
	mv "$w/layer.tar" "$w/out/$layer_sha/layer.tar"
	for a in "$@"; do entry+="${entry:+,}\"$a\""; done
	printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":[%s],"Env":["PATH=/"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"herald lab: %s"}]}' \
		"$entry" "$layer_sha" "${names[*]}" >"$w/config.json"
	config_sha=$(sha256sum "$w/config.json" | cut -d' ' -f1)
	mv "$w/config.json" "$w/out/$config_sha.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config_sha" "$tag" "$layer_sha" \
		>"$w/out/manifest.json"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$w/out" -cf "$out.tmp" \
		manifest.json "$config_sha.json" "$layer_sha"
	mv -f "$out.tmp" "$out"
	rm -rf "$w"
}

# images_build: (re)build the image tarballs into $IMAGE_CACHE. The herald image is skipped (with a message)
# while ./cmd/herald does not build.
images_build() {
	local bin=$IMAGE_CACHE/bin
	mkdir -p "$bin"
	(cd "$REPO_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$bin/" ./e2e/lab/images/pause ./e2e/lab/images/echo) ||
		return 1
	image_archive "$IMAGE_CACHE/pause.tar" "$PAUSE_IMAGE" "$bin/pause" /pause
	image_archive "$IMAGE_CACHE/echo.tar" "$ECHO_IMAGE" "$bin/echo" /echo
	rm -f "$IMAGE_CACHE/herald.tar"
	if [ "${LAB_SKIP_HERALD_IMAGE:-}" = 1 ]; then
		log "images: herald image skipped (LAB_SKIP_HERALD_IMAGE=1)"
	elif (cd "$REPO_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$bin/" ./cmd/herald ./cmd/herald-ccm) \
		>"$IMAGE_CACHE/herald-build.log" 2>&1; then
		image_archive "$IMAGE_CACHE/herald.tar" "$HERALD_IMAGE" "$bin/herald,$bin/herald-ccm" /herald
	else
		log "images: ./cmd/herald does not build yet; herald image skipped (see $IMAGE_CACHE/herald-build.log)"
	fi
	log "images: $(cd "$IMAGE_CACHE" && echo *.tar)"
}

images_import() {
	local i=$1 t
	for t in "$IMAGE_CACHE"/*.tar; do
		node_ctr "$i" images import --all-platforms "$t" >/dev/null || { log "import $t into node $i failed"; return 1; }
	done
}

# cmd_images: `lab images`: rebuild the tarballs and, when the lab is up, import them into every node (the next
# `lab herald-down; lab herald-up` runs the new Herald image).
cmd_images() {
	images_build
	if lab_is_up; then
		local i
		for i in $(seq 1 "$LAB_NODES"); do
			images_import "$i" || die "importing the images into node $i failed"
		done
		log "images imported into the $LAB_NODES running nodes"
	fi
}
