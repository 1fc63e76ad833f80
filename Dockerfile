# syntax=docker/dockerfile:1
# batchlake's image: `make image`, or docker build -t batchlake .
# The binary links DuckDB through cgo, so it is built on the golang image (gcc,
# g++, glibc) and run on a glibc base with libstdc++: Debian slim, the same
# release as the build stage's, so the binary finds the glibc it was linked
# against. GO_VERSION follows go.mod's go line (a test checks it).
ARG GO_VERSION=1.26
ARG DEBIAN_RELEASE=bookworm

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The build tags are the Makefile's TAGS (a test checks it). No .git in the
# context (.dockerignore): -buildvcs=false, and --version says "devel".
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -buildvcs=false -trimpath -tags duckdb_arrow -ldflags "-s -w" \
        -o /out/batchlake ./cmd/batchlake

FROM debian:${DEBIAN_RELEASE}-slim
# CA certificates for the providers' and the object stores' TLS.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 batchlake \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/batchlake --shell /usr/sbin/nologin batchlake
COPY --from=build /out/batchlake /usr/local/bin/batchlake
USER 10001:10001
WORKDIR /home/batchlake
ENTRYPOINT ["batchlake"]
CMD ["--help"]
