# edgegpu's image for users who build with Docker buildx:
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/edgegpu:TAG --push .
#
# It holds what scripts/image puts in the image CI builds and tests with buildah: the stripped
# binary (our libraries static, glibc dynamic so NVML can be dlopen'ed), the glibc runtime
# files it and NVIDIA's libnvidia-ml.so.1 need, the CUDA interposer
# (/usr/lib/edgegpu/libedgegpu-cuda.so), the license files (/usr/share/doc/edgegpu/), nothing
# else. The builder stage runs
# `scripts/image --rootfs-only`, the code that stages CI's image, so the file list has one source.
#
# CI does not build this file (it has no registry to pull debian:bookworm from); CI builds the
# same files with scripts/image and tests that image (tests/image). The builder stage runs as
# linux/amd64 (natively on amd64 machines, under emulation elsewhere) and cross-compiles for
# arm64 with Debian's cross toolchain (cross/arm64.ini, pkgconf:arm64's wrapper), as CI does;
# it fetches libmicrohttpd's Debian source package (scripts/mhd), so it needs deb.debian.org.
# .dockerignore keeps build trees and .git out of the context, so the version comes in as build
# arguments, which scripts/version prints (the same values as the labels CI's image gets):
#
#   docker buildx build $(scripts/version --build-args) --platform ... .
#
# In a source tarball (its VERSION file) the arguments must match the file; in a clone they
# write it. A build without them fails rather than label or print "unknown".

FROM --platform=linux/amd64 debian:bookworm AS build
ARG TARGETARCH
RUN set -eux; \
	printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		>/etc/apt/sources.list.d/edgegpu-src.sources; \
	cross=; \
	if [ "$TARGETARCH" = arm64 ]; then \
		dpkg --add-architecture arm64; \
		cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu libc6:arm64 \
			libnghttp2-dev:arm64 libprotobuf-c-dev:arm64 libyaml-dev:arm64 \
			libmicrohttpd-dev:arm64 zlib1g-dev:arm64 pkgconf:arm64"; \
	fi; \
	apt-get update -q; \
	apt-get install -y -q --no-install-recommends meson ninja-build pkg-config gcc make patch \
		xz-utils file binutils libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libyaml-dev \
		libmicrohttpd-dev zlib1g-dev $cross
# (the apt lists stay: scripts/mhd fetches libmicrohttpd's source package with them)
WORKDIR /src
COPY . .
ARG VERSION
ARG REVISION
ARG CREATED
RUN set -eu; \
	want="$(printf 'version=%s\nrevision=%s\ndate=%s' "$VERSION" "$REVISION" "$CREATED")"; \
	if [ -z "$VERSION" ] || [ -z "$REVISION" ] || [ -z "$CREATED" ]; then \
		echo "pass \$(scripts/version --build-args) to docker build: VERSION, REVISION, CREATED" >&2; \
		exit 1; \
	fi; \
	if [ -f VERSION ]; then \
		[ "$(cat VERSION)" = "$want" ] || { echo "the build args differ from VERSION:" >&2; cat VERSION >&2; exit 1; }; \
	else \
		printf '%s\n' "$want" >VERSION; \
	fi; \
	IMAGE_ARCHES="$TARGETARCH" scripts/image --rootfs-only /out

FROM scratch
ARG TARGETARCH
ARG VERSION
ARG REVISION
ARG CREATED
COPY --from=build /out/rootfs-${TARGETARCH}/ /
# For the NVIDIA container runtime (runtimeClassName: nvidia) to mount NVML in; with a hostPath
# of the driver root at /driver-root (--container-driver-root) they do nothing.
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=utility
LABEL org.opencontainers.image.title=edgegpu \
	org.opencontainers.image.description="Kubernetes device plugin for NVIDIA GPUs on edge nodes" \
	org.opencontainers.image.licenses=Apache-2.0 \
	org.opencontainers.image.version=$VERSION \
	org.opencontainers.image.revision=$REVISION \
	org.opencontainers.image.created=$CREATED \
	org.opencontainers.image.source=https://github.com/edgegpu/edgegpu
# Root, as the kubelet's device-plugins directory is root's (deployments/ says why).
USER 0:0
ENTRYPOINT ["/usr/bin/edgegpu"]
CMD ["serve"]
