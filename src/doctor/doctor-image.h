#pragma once

/*
 * The local image stores the doctor asks for --image REF (doctor-compat.c): Docker's Engine API
 * (HTTP/1.1 over its unix socket) and containerd's gRPC API (Images/Get, then Content/Read of
 * the index or manifest and the config), and the OCI/Docker JSON that says which platforms an
 * image is for.
 *
 * Every call is bounded by @timeout_ms (a peer that hangs is an error, never a hung doctor).
 * Caller's thread; no state kept between calls. Errors come back as a negative errno and, where
 * @reterr is given, a heap message the caller frees.
 */

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define IMAGE_MAX_PLATFORMS 16

struct image_platform {
	char os[32];
	char arch[32];
	char variant[16];
};

struct image_info {
	char media_type[128];  /* containerd: the target's media type; Docker: "" */
	char digest[96];       /* containerd: the target's digest; Docker: the image id */
	char cuda_version[32]; /* CUDA_VERSION in the config's Env ("12.2.0"), "" none/unknown */
	unsigned n_platforms;  /* platforms found, at most IMAGE_MAX_PLATFORMS kept */
	struct image_platform platforms[IMAGE_MAX_PLATFORMS];
};

/*
 * The name containerd stores for @ref: "nginx" -> "docker.io/library/nginx:latest",
 * "ghcr.io/a/b" -> "ghcr.io/a/b:latest"; a tag or digest given is kept. Returns 0 and a heap
 * string, or -EINVAL (not a reference: empty, spaces or control bytes, upper case in the path,
 * an empty component) or -ENOMEM.
 */
int image_ref_normalize(const char *ref, char **ret) WARN_UNUSED;

/*
 * Reads image JSON: an OCI index or Docker manifest list (platforms of every entry, entries for
 * "unknown" platforms, as attestations, left out), an image config or Docker's image inspect
 * (its one platform: architecture/Architecture, os/Os, variant/Variant, and CUDA_VERSION from
 * config.Env/Config.Env into info->cuda_version, as NVIDIA's CUDA images set it), or a manifest (no
 * platform: *@ret_config gets the config's digest, heap; NULL otherwise). Returns 0, -EBADMSG
 * (not JSON, or none of these) or -ENOMEM. @info's platforms are appended to.
 */
int image_json_platforms(const char *json, size_t len, struct image_info *info,
			 char **ret_config) WARN_UNUSED;

/*
 * Asks Docker at the socket @sock about @ref (GET /images/{ref}/json). Returns 1 (found, @info
 * filled), 0 (404: not in the store) or a negative errno: -ENOENT/-ECONNREFUSED (no Docker
 * there), -ETIMEDOUT, -EPROTO (an answer we cannot read, or another HTTP status).
 */
int image_docker_lookup(const char *sock, const char *ref, unsigned timeout_ms,
			struct image_info *info, char **reterr) WARN_UNUSED;

/*
 * Asks containerd at @sock, namespace @ns, about the image named @name (already normalised).
 * Returns 1 (found, @info filled from the index, or the manifest's config), 0 (NOT_FOUND) or a
 * negative errno as grpc_client_call_sync() gives it, -EPROTO for a reply we cannot read.
 */
int image_containerd_lookup(const char *sock, const char *ns, const char *name, unsigned timeout_ms,
			    struct image_info *info, char **reterr) WARN_UNUSED;
