# For people with Docker: docker build --build-arg VERSION=0.1.0 -t ghcr.io/courier-k8s/courier:0.1.0 .
# Without Docker, `make image` writes the same image as an OCI tarball.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git is not in the context: the version is stamped, the revision "unknown".
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/courier-k8s/courier/internal/version.version=${VERSION}" -o /courier .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /courier /courier
LABEL org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/courier-k8s/courier"
USER 65532:65532
ENTRYPOINT ["/courier"]
