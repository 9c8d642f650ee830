/*
 * libFuzzer target for Allocate: byte 0 picks the resource and GPU health (plugin-rig.h), the
 * rest is the AllocateRequest the kubelet would send, called through the plugin's gRPC server.
 * Findings, besides crashes and leaks: an answer that names a GPU the request's devices are
 * not on (or misses one), a device ID the resource does not have (or has under another
 * spelling) accepted, a valid request refused or an invalid one accepted (checked against an
 * independent reading of the request: the resource's every ID written out and compared as
 * strings), an answer with the wrong number of containers.
 */
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "grpc.h"
#include "plugin-rig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether the comma list @list holds exactly the UUIDs of the GPUs in @want (a bit per GPU). */
static bool visible_is(const char *list, unsigned want)
{
	unsigned seen = 0;

	for (const char *s = list; *s;) {
		size_t n = strcspn(s, ",");
		unsigned g;

		for (g = 0; g < RIG_GPUS; g++)
			if (strlen(rig_uuid(g)) == n && memcmp(rig_uuid(g), s, n) == 0)
				break;
		if (g == RIG_GPUS || seen & 1u << g)
			return false; /* not one of ours, or twice */
		seen |= 1u << g;
		s += n + (s[n] == ',');
	}
	return seen == want;
}

/*
 * The verdict an independent reading gives container @q: 0 valid (@gpus: the GPUs it needs, a
 * bit each), -1 refused.
 */
static int expect_container(const struct rig *r, const V1beta1__ContainerAllocateRequest *q,
			    unsigned *gpus)
{
	unsigned n_gpus = 0;
	uint8_t *seen;

	*gpus = 0;
	if (q->n_devices_ids == 0)
		return -1;
	if (r->res->kind == RESOURCE_REPLICA && r->res->fail_requests_gt_one &&
	    q->n_devices_ids > 1)
		return -1;
	seen = calloc(r->res->n_devices, 1);
	if (!seen)
		abort();
	for (size_t i = 0; i < q->n_devices_ids; i++) {
		int d = rig_find(r, q->devices_ids[i], strlen(q->devices_ids[i]));
		unsigned g;

		if (d < 0 || seen[d]) {
			free(seen);
			return -1;
		}
		seen[d] = 1;
		g = resource_device_gpu(r->res, (unsigned)d);
		if (!r->healthy[g]) {
			free(seen);
			return -1;
		}
		n_gpus += !(*gpus & 1u << g);
		*gpus |= 1u << g;
	}
	free(seen);
	if (r->res->kind == RESOURCE_GPUMEM && n_gpus > 1 && !r->split_allow)
		return -1;
	return 0;
}

static const char *env_get(const V1beta1__ContainerAllocateResponse *cr, const char *key)
{
	for (size_t i = 0; i < cr->n_envs; i++)
		if (streq(cr->envs[i]->key, key))
			return cr->envs[i]->value;
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	V1beta1__AllocateRequest *m = NULL;
	V1beta1__AllocateResponse *resp = NULL;
	struct rig_answer a;
	unsigned *want = NULL;
	bool valid = true, field0, nul;
	struct rig r;

	if (size < 1)
		return 0;
	rig_init(&r, data[0]);
	rig_call(&r, "Allocate", data + 1, size - 1, &a);

	m = v1beta1__allocate_request__unpack(NULL, size - 1, data + 1);
	rig_scan(data + 1, size - 1, 1, &field0, &nul);
	if (m && field0) {
		/* protobuf-c takes field number 0; the daemon (and Go) refuse it: not decoded. */
		v1beta1__allocate_request__free_unpacked(m, NULL);
		m = NULL;
	}
	if (m) {
		want = calloc(m->n_container_requests + 1, sizeof(*want));
		if (!want)
			abort();
		valid = m->n_container_requests > 0;
		for (size_t c = 0; valid && c < m->n_container_requests; c++) {
			const V1beta1__ContainerAllocateRequest *q = m->container_requests[c];

			valid = expect_container(&r, q, &want[c]) == 0;
		}
		/* protobuf-c keeps a NUL inside a string, cutting the ID short: refused. */
		valid = valid && !nul;
	}
	if (a.status == GRPC_STATUS_OK) {
		/* Accepted: it decoded, and every container's answer is its GPUs, no other. */
		if (!m || !valid || a.n_msgs != 1)
			abort();
		resp = v1beta1__allocate_response__unpack(NULL, a.msg.len, a.msg.data);
		if (!resp || resp->n_container_responses != m->n_container_requests)
			abort();
		for (size_t c = 0; c < resp->n_container_responses; c++) {
			const char *v =
				env_get(resp->container_responses[c], "NVIDIA_VISIBLE_DEVICES");

			if (!v || !visible_is(v, want[c]))
				abort();
		}
		v1beta1__allocate_response__free_unpacked(resp, NULL);
	} else {
		/* Refused: with a reason, and only what an independent reading refuses too. */
		if (a.n_msgs != 0 || !a.message[0])
			abort();
		if (m && valid && a.status != GRPC_STATUS_RESOURCE_EXHAUSTED)
			abort();
	}
	if (m)
		v1beta1__allocate_request__free_unpacked(m, NULL);
	free(want);
	rig_answer_release(&a);
	rig_free(&r);
	return 0;
}
