# syntax=docker/dockerfile:1
# shardcounter's image: a static binary (no cgo) on distroless/static,
# running as the non-root user 65532, its data directory /data a volume.
# The default store is Pebble under /data; give --store (or
# SHARDCOUNTER_STORE) for PostgreSQL, Redis or Firestore.
#
#	docker build -t shardcounter .
#	docker run -p 8080:8080 -v shardcounter-data:/data shardcounter
#
# docs/OPERATIONS.md, "Images and manifests", says what was run and what
# was not.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/shardcounter ./cmd/shardcounter \
	&& mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shardcounter /usr/local/bin/shardcounter
# An empty /data owned by the user the server runs as: a volume mounted
# there starts with that owner.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME /data
# HTTP (the API, /healthz, /readyz, /metrics) and the Redis protocol.
EXPOSE 8080 6380
ENV SHARDCOUNTER_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/shardcounter"]
CMD ["serve", "--store", "pebble:/data/pebble", "--resp-listen", "0.0.0.0:6380"]
