#pragma once

/*
 * The fuzzers' device plugin (fuzz-allocate.c, fuzz-preferred.c): a fresh plugin per input over
 * a fixed fake node (RIG_GPUS GPUs, tests/unit/gpus.h), called through a memory connection with
 * an HTTP/2 client (nghttp2), so a request takes the daemon's whole path: the gRPC server, the
 * handler's decode and its checks against the resource. No loop, no socket, no state kept
 * from one input to the next. Not thread-safe (fuzzers are single-threaded).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resource.h"
#include "util.h"

#define RIG_GPUS 4

struct rig {
	struct plugin *plugin;
	const struct resource *res; /* the plugin's */
	bool healthy[RIG_GPUS];
	bool split_allow;
	/* Every device ID of the resource, in index order, written by resource_device_id(). */
	char (*ids)[128];
};

/* The answer to one call. */
struct rig_answer {
	int status;	   /* grpc-status; -1: none came */
	char message[512]; /* grpc-message, percent-encoded as sent */
	struct buf msg;	   /* the response message (without the 5-byte gRPC prefix) */
	size_t n_msgs;	   /* messages received */
};

/*
 * A plugin for the resource @sel picks (bits 0-1: whole GPUs, replicas (4, 2, 3, 2 per GPU),
 * gpumem (4 GiB units, 1 GiB reserve); bit 2: fail_requests_gt_one; bit 3: onSplit allow;
 * bits 4-7: GPUs 0-3 unhealthy, only when all of bits 4-7 are not set, so most inputs keep every
 * GPU up). Aborts on failure (out of memory is not a finding here).
 */
void rig_init(struct rig *r, uint8_t sel);
void rig_free(struct rig *r);

/* Calls /v1beta1.DevicePlugin/@method with the message @msg. Aborts if no answer came. */
void rig_call(struct rig *r, const char *method, const uint8_t *msg, size_t len,
	      struct rig_answer *ret);
void rig_answer_release(struct rig_answer *a);

/* The index of @id (@len bytes) in r->ids, by string comparison; -1 when it is none. */
int rig_find(const struct rig *r, const char *id, size_t len);
/*
 * Walks request bytes as the wire has them (no protobuf-c): *@field0 when a key of the request
 * or of a container request (field 1) has field number 0 (protobuf-c takes it; the daemon's
 * reader and Go's refuse it); *@nul when a container request's field 1..@id_fields (its device
 * IDs) holds a NUL byte (protobuf-c's strings end there). Stops quietly at malformed bytes.
 */
void rig_scan(const uint8_t *p, size_t len, unsigned id_fields, bool *field0, bool *nul);
/* The fake GPU's UUID for gpu_info index @gpu. */
const char *rig_uuid(unsigned gpu);
