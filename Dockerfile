# For people with Docker: docker build -t ghcr.io/courier-k8s/courier:0.1.0 .
# Without Docker, `make image` writes the same image as an OCI tarball.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /courier .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /courier /courier
LABEL org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/courier-k8s/courier"
USER 65532:65532
ENTRYPOINT ["/courier"]
