# certmountd node image. Two stages on Debian 12: the build stage installs the
# build dependencies with the project's own script and builds in Release; the
# runtime stage carries only the shared libraries certmountd and certmountctl
# load, mount(8) and the sqlite3 shell for reading node state.
#
#   docker build -t certmount/certmountd:0.1.0 .
#   bash scripts/image.sh      (podman, no registry: builds and smoke-tests)
#
# CERTMOUNT_WERROR=ON makes compiler warnings fatal (CI); off by default so a
# newer compiler's new warning cannot break a user's build.

FROM debian:12 AS build
ARG CERTMOUNT_WERROR=OFF
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh --build-only && apt-get install -y -qq --no-install-recommends ccache \
 && rm -rf /var/lib/apt/lists/*
COPY . .
# The ccache directory is a build cache mount: a rebuild after a small change
# recompiles only what changed, and nothing of it lands in an image layer.
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DCERTMOUNT_WERROR="$CERTMOUNT_WERROR" \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
 && cmake --build /build --target certmountd certmountctl -j"$(nproc)" \
 && strip /build/certmountd /build/certmountctl

FROM debian:12
# The runtime libraries, by Debian 12 package (from ldd of both binaries):
# gRPC and its dependencies, protobuf, SQLite (SQLiteCpp is linked
# statically), OpenSSL, spdlog/fmt, yaml-cpp, libcurl (the Kubernetes API
# client), prometheus-cpp (metrics) and cpp-httplib with its compression
# libraries (the metrics server).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libc-ares2 libre2-9 zlib1g \
      libsqlite3-0 libssl3 libspdlog1.10 libfmt9 libyaml-cpp0.7 \
      libcurl4 libcpp-httplib0.11 libbrotli1 libprometheus-cpp-core1.0 \
      util-linux mount sqlite3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/certmountd /build/certmountctl /usr/local/bin/
# Fail the image build, not the first pod, when a library is missing.
RUN ! ldd /usr/local/bin/certmountd /usr/local/bin/certmountctl | grep 'not found' \
 && certmountd --version
# Root: certmountd mounts a tmpfs and bind-mounts into pods (the DaemonSet
# also runs it privileged).
USER root
ENTRYPOINT ["/usr/local/bin/certmountd"]
