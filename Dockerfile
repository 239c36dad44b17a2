# For people with Docker: docker build --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/courier-k8s/courier:0.1.0 .
# Without Docker, `make image` writes the image as an OCI image index (linux/amd64, linux/arm64).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git is not in the context: pass the commit as REVISION (else "unknown").
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/courier-k8s/courier/internal/version.version=${VERSION} -X github.com/courier-k8s/courier/internal/version.revision=${REVISION}" -o /courier .

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
COPY --from=build /courier /courier
LABEL org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/courier-k8s/courier" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
USER 65532:65532
ENTRYPOINT ["/courier"]
