/*
 * libFuzzer target for GetPreferredAllocation: byte 0 picks the resource and GPU health
 * (plugin-rig.h), the rest is the PreferredAllocationRequest, called through the plugin's gRPC
 * server. Findings, besides crashes and leaks: a preferred set that is not exactly
 * allocation_size devices, names a device twice, names one the resource does not have or the
 * request did not offer, or leaves out a must-include device; a valid request refused or an
 * invalid one answered (checked against protobuf-c's decode and the resource's every ID
 * written out and compared as strings); the wrong number of container answers.
 */
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "grpc.h"
#include "plugin-rig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CONTAINERS_MAX 16 /* plugin-alloc.c answers at most this many */

static bool in_list(char **v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (streq(v[i], s))
			return true;
	return false;
}

/* An independent reading of one container's request: whether the plugin must answer it. */
static bool expect_valid(const struct rig *r, const V1beta1__ContainerPreferredAllocationRequest *q)
{
	uint8_t *avail = calloc(r->res->n_devices, 1), *must = calloc(r->res->n_devices, 1);
	size_t n_avail = 0, n_must = 0;
	bool ok = true;

	if (!avail || !must)
		abort();
	for (size_t i = 0; ok && i < q->n_must_include_deviceids; i++) {
		int d = rig_find(r, q->must_include_deviceids[i],
				 strlen(q->must_include_deviceids[i]));

		ok = d >= 0 && !must[d];
		if (ok) {
			must[d] = 1;
			n_must++;
		}
	}
	for (size_t i = 0; ok && i < q->n_available_deviceids; i++) {
		int d = rig_find(r, q->available_deviceids[i], strlen(q->available_deviceids[i]));

		/* Unknown available IDs are skipped; duplicates and must-includes count once. */
		if (d >= 0 && !avail[d] && !must[d]) {
			avail[d] = 1;
			n_avail++;
		}
	}
	free(avail);
	free(must);
	return ok && q->allocation_size >= 0 && (size_t)q->allocation_size >= n_must &&
	       (size_t)q->allocation_size <= n_avail + n_must;
}

/* One container's answer @cr checked against the resource and, when it decoded, request @q. */
static void check_answer(const struct rig *r, const V1beta1__ContainerPreferredAllocationRequest *q,
			 const V1beta1__ContainerPreferredAllocationResponse *cr)
{
	uint8_t *seen = calloc(r->res->n_devices, 1);

	if (!seen)
		abort();
	for (size_t i = 0; i < cr->n_deviceids; i++) {
		int d = rig_find(r, cr->deviceids[i], strlen(cr->deviceids[i]));

		if (d < 0 || seen[d])
			abort(); /* not ours, or twice */
		seen[d] = 1;
		if (q &&
		    !in_list(q->available_deviceids, q->n_available_deviceids, cr->deviceids[i]) &&
		    !in_list(q->must_include_deviceids, q->n_must_include_deviceids,
			     cr->deviceids[i]))
			abort(); /* not offered */
	}
	if (q) {
		if (cr->n_deviceids != (size_t)q->allocation_size)
			abort();
		for (size_t i = 0; i < q->n_must_include_deviceids; i++)
			if (!in_list(cr->deviceids, cr->n_deviceids, q->must_include_deviceids[i]))
				abort();
	}
	free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	V1beta1__PreferredAllocationRequest *m;
	V1beta1__PreferredAllocationResponse *resp;
	struct rig_answer a;
	bool valid = false, field0, nul;
	struct rig r;

	if (size < 1)
		return 0;
	rig_init(&r, data[0]);
	rig_call(&r, "GetPreferredAllocation", data + 1, size - 1, &a);

	m = v1beta1__preferred_allocation_request__unpack(NULL, size - 1, data + 1);
	rig_scan(data + 1, size - 1, 2, &field0, &nul);
	if (m && (field0 || nul)) {
		/*
		 * Field number 0 (protobuf-c takes it, the daemon and Go refuse it), or an ID
		 * protobuf-c cuts short at a NUL: no independent reading, only the answer's checks.
		 */
		v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
		m = NULL;
	}
	if (m) {
		valid = m->n_container_requests <= CONTAINERS_MAX;
		for (size_t c = 0; valid && c < m->n_container_requests; c++)
			valid = expect_valid(&r, m->container_requests[c]);
	}
	if (a.status == GRPC_STATUS_OK) {
		if (a.n_msgs != 1 || (m && !valid))
			abort();
		resp = v1beta1__preferred_allocation_response__unpack(NULL, a.msg.len, a.msg.data);
		if (!resp || (m && resp->n_container_responses != m->n_container_requests))
			abort();
		for (size_t c = 0; c < resp->n_container_responses; c++)
			check_answer(&r, m ? m->container_requests[c] : NULL,
				     resp->container_responses[c]);
		v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
	} else {
		if (a.n_msgs != 0 || !a.message[0])
			abort();
		if (m && valid && a.status != GRPC_STATUS_RESOURCE_EXHAUSTED)
			abort();
	}
	if (m)
		v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
	rig_answer_release(&a);
	rig_free(&r);
	return 0;
}
