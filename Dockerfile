# Herald's image: one static binary, /herald, for every role (controller, speaker, svclb, nllb, ccm).
#
#   make image                      # docker build, tagged $(IMAGE_TAG), version and commit stamped
#   docker build -t herald:dev .    # the same without make (version "dev")
#
# Without Docker, `make image-archive` builds the same image as a docker-archive tarball (the lab's way).
#
# The image sets no user: each role's pod says who it runs as (the chart runs the controller as 65532, the speaker
# and NLLB as root with only the capabilities they need, and the svclb pods the controller creates need root for
# their nftables rules).

# The Go toolchain image (a mirror's name works too).
ARG GO_IMAGE=golang:1.26

# No --platform=$BUILDPLATFORM here: Docker's legacy builder does not set it. With BuildKit and --platform the build
# stage runs as the target platform; without, TARGETOS and TARGETARCH are empty and Go builds for the host.
FROM ${GO_IMAGE} AS build
WORKDIR /src
# The module cache first: it survives source edits.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/ ./cmd/herald ./cmd/herald-ccm

# Nothing but the binaries (herald, and herald-ccm that `herald ccm` runs): Herald needs no shell, no libc and no system CA certificates (it trusts the cluster's CA
# from its ServiceAccount or the node's kubeconfig).
FROM scratch
COPY --from=build /out/herald /out/herald-ccm /
ENV PATH=/
ENTRYPOINT ["/herald"]
