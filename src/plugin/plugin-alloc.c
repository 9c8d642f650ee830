#include "plugin-internal.h"

/*
 * The DevicePlugin's unary calls: Allocate, GetPreferredAllocation, GetDevicePluginOptions
 * and PreStartContainer. The plugin's state lives in plugin.c (plugin-internal.h).
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "enforce.h"
#include "gpu.h"
#include "pbwire.h"
#include "resource.h"

#define LOG_MODULE "plugin"
#include "log.h"

void plugin_reply(struct grpc_call *call, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(n ? n : 1);
	int r;

	if (!b) {
		(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	protobuf_c_message_pack(m, b);
	r = grpc_call_send(call, b, n);
	free(b);
	if (r == -EMSGSIZE)
		(void)grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
				       "response larger than the kubelet accepts (4 MiB)");
	else if (r < 0)
		(void)grpc_call_finish(call, grpc_status_from_errno(r),
				       "sending the response failed");
	else
		(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

void plugin_fail(struct grpc_call *call, enum grpc_status st, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("request refused", "method=%s grpc_status=%s err=%s", grpc_call_path(call),
		 grpc_status_name((int)st), log_q(msg));
	(void)grpc_call_finish(call, st, msg);
}

void plugin_handle_options(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	o.pre_start_required = false;
	o.get_preferred_allocation_available = true;
	plugin_reply(call, &o.base);
}

void plugin_handle_prestart(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	V1beta1__PreStartContainerRequest *m =
		v1beta1__pre_start_container_request__unpack(NULL, len, req);
	V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;

	if (!m) {
		plugin_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
			    "malformed PreStartContainerRequest");
		return;
	}
	v1beta1__pre_start_container_request__free_unpacked(m, NULL);
	plugin_reply(call, &o.base);
}

/*
 * Maps an Allocate request's IDs to device indices. An unknown or duplicate ID is an error.
 * Returns the count, or -EINVAL with @bad naming the ID and @why saying what is wrong.
 */
static int map_ids(const struct plugin *p, char **ids, size_t n, uint64_t *seen, unsigned *out,
		   const char **bad, const char **why)
{
	for (size_t i = 0; i < n; i++) {
		int d = resource_device_lookup(p->res, ids[i], strlen(ids[i]));

		if (d < 0 || bitmap_test(seen, (unsigned)d)) {
			*bad = ids[i];
			*why = d < 0 ? "unknown device" : "duplicate device";
			return -EINVAL;
		}
		bitmap_set(seen, (unsigned)d);
		out[i] = (unsigned)d;
	}
	return (int)n;
}

/* One ContainerPreferredAllocationRequest, decoded in place (IDs mapped, never copied). */
struct pref_req {
	unsigned *avail, *must;
	size_t n_avail, n_must;
	int64_t size;
};

/*
 * Decodes a ContainerPreferredAllocationRequest in one pass after a counting pass: available
 * IDs this resource does not have are skipped (the kubelet may list anything); an unknown or
 * duplicate must-include ID is an error. @seen and @must_bits are zeroed bitmaps.
 * Returns 0, -EBADMSG, -ENOMEM, or -EINVAL with @bad/@badlen naming the ID.
 */
static int decode_pref(const struct plugin *p, const uint8_t *data, size_t len, uint64_t *seen,
		       uint64_t *must_bits, struct pref_req *q, const char **why,
		       const uint8_t **bad, size_t *badlen)
{
	struct pb_reader rd;
	struct pb_field f;
	size_t na = 0, nm = 0, k = 0;
	int r;

	pb_reader_init(&rd, data, len);
	while ((r = pb_next(&rd, &f)) > 0) {
		na += f.number == 1;
		nm += f.number == 2;
	}
	if (r < 0)
		return r;
	q->avail = malloc((na + 1) * sizeof(*q->avail));
	q->must = malloc((nm + 1) * sizeof(*q->must));
	if (!q->avail || !q->must)
		return -ENOMEM;
	pb_reader_init(&rd, data, len);
	while (pb_next(&rd, &f) > 0) {
		int d;

		if (f.number == 3 && f.wire == PB_VARINT) {
			q->size = (int64_t)(int32_t)f.varint;
			continue;
		}
		if ((f.number != 1 && f.number != 2) || f.wire != PB_LEN)
			continue;
		d = resource_device_lookup(p->res, (const char *)f.data, f.len);
		if (f.number == 1) {
			if (d >= 0 && !bitmap_test(seen, (unsigned)d)) {
				bitmap_set(seen, (unsigned)d);
				q->avail[q->n_avail++] = (unsigned)d;
			}
			continue;
		}
		if (d < 0 || bitmap_test(must_bits, (unsigned)d)) {
			*why = d < 0 ? "unknown device" : "duplicate device";
			*bad = f.data;
			*badlen = f.len;
			return -EINVAL;
		}
		bitmap_set(must_bits, (unsigned)d);
		q->must[q->n_must++] = (unsigned)d;
	}
	/* must-include devices are not also candidates */
	for (size_t i = 0; i < q->n_avail; i++)
		if (!bitmap_test(must_bits, q->avail[i]))
			q->avail[k++] = q->avail[i];
	q->n_avail = k;
	return 0;
}

void plugin_handle_preferred(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct plugin *p = userdata;
	const struct resource *res = p->res;
	V1beta1__PreferredAllocationResponse out = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	V1beta1__ContainerPreferredAllocationResponse *crs[16], *cr;
	struct resource_pref_ctx pctx = { .numa = p->ctx->numa,
					  .distance = p->ctx->distance,
					  .n_all = p->ctx->info->n_devices };
	size_t nwords = BITMAP_WORDS(res->n_devices) + 1;
	struct pref_req q = { 0 };
	uint64_t *seen = NULL, *must_bits = NULL;
	unsigned *pick = NULL;
	usec_t t0 = now_usec();
	struct pb_reader rd;
	struct pb_field f;
	int r;

	p->stats.preferred++;
	out.container_responses = crs;
	seen = malloc(nwords * sizeof(*seen));
	must_bits = malloc(nwords * sizeof(*must_bits));
	if (!seen || !must_bits)
		goto oom;
	pb_reader_init(&rd, req, len);
	while ((r = pb_next(&rd, &f)) > 0) {
		const char *why = NULL;
		const uint8_t *bad = NULL;
		size_t badlen = 0;
		char *ip;
		int np;

		if (f.number != 1 || f.wire != PB_LEN)
			continue;
		if (out.n_container_responses == ELEMENTSOF(crs)) {
			plugin_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
				    "too many container requests (at most %zu)", ELEMENTSOF(crs));
			goto out;
		}
		free(q.avail);
		free(q.must);
		free(pick);
		pick = NULL;
		memset(&q, 0, sizeof(q));
		memset(seen, 0, nwords * sizeof(*seen));
		memset(must_bits, 0, nwords * sizeof(*must_bits));
		r = decode_pref(p, f.data, f.len, seen, must_bits, &q, &why, &bad, &badlen);
		if (r == -ENOMEM)
			goto oom;
		if (r == -EINVAL) {
			plugin_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "must-include %s: %.*s",
				    why, (int)MIN(badlen, 128), (const char *)bad);
			goto out;
		}
		if (r < 0)
			break;
		if (q.size < 0 || (uint64_t)q.size > q.n_avail + q.n_must ||
		    (size_t)q.size < q.n_must) {
			plugin_fail(
				call, GRPC_STATUS_INVALID_ARGUMENT,
				"allocation_size %lld is out of range (%zu devices available, %zu must-include)",
				(long long)q.size, q.n_avail + q.n_must, q.n_must);
			goto out;
		}
		pick = malloc(((size_t)q.size + 1) * sizeof(*pick));
		if (!pick)
			goto oom;
		np = resource_preferred(res, &pctx, q.avail, q.n_avail, q.must, q.n_must,
					(unsigned)q.size, pick);
		if (np < 0) {
			plugin_fail(call, grpc_status_from_errno(np), "choosing devices failed");
			goto out;
		}
		cr = calloc(1, sizeof(*cr));
		if (!cr)
			goto oom;
		v1beta1__container_preferred_allocation_response__init(cr);
		crs[out.n_container_responses++] = cr;
		/* One block for every ID string (the slot past the last ID holds it until packed). */
		cr->deviceids = calloc((size_t)np + 1, sizeof(char *));
		ip = malloc((size_t)np * 128 + 1);
		if (!cr->deviceids || !ip) {
			free(ip);
			goto oom;
		}
		cr->deviceids[np] = ip;
		for (int i = 0; i < np; i++) {
			size_t l = resource_device_id(res, pick[i], ip);

			cr->deviceids[i] = ip;
			ip += l + 1;
		}
		cr->n_deviceids = (size_t)np;
	}
	if (r < 0) {
		plugin_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
			    "malformed PreferredAllocationRequest");
		goto out;
	}
	plugin_reply(call, &out.base);
	log_debug("preferred allocation",
		  "resource=%s bytes=%zu available=%zu size=%lld dur_us=%llu", res->name, len,
		  q.n_avail + q.n_must, (long long)q.size, (unsigned long long)(now_usec() - t0));
	goto out;
oom:
	plugin_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
out:
	for (size_t c = 0; c < out.n_container_responses; c++) {
		if (crs[c]->deviceids)
			free(crs[c]->deviceids[crs[c]->n_deviceids]);
		free(crs[c]->deviceids);
		free(crs[c]);
	}
	free(seen);
	free(must_bits);
	free(q.avail);
	free(q.must);
	free(pick);
}

static void remember_alloc(struct plugin *p, const unsigned *devs, size_t n)
{
	struct recent_alloc *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return;
	ra->devs = malloc((n + 1) * sizeof(*devs));
	if (!ra->devs) {
		free(ra);
		return;
	}
	memcpy(ra->devs, devs, n * sizeof(*devs));
	ra->n = n;
	ra->when = now_usec();
	ra->next = p->recent;
	p->recent = ra;
}

/* Builds one container's response. Returns 0, or a gRPC status with @msg filled. */
static enum grpc_status allocate_one(struct plugin *p, const V1beta1__ContainerAllocateRequest *q,
				     uint64_t *seen, size_t nwords,
				     V1beta1__ContainerAllocateResponse **ret, char *msg,
				     size_t msgsz)
{
	const struct resource *res = p->res;
	const struct gpu_device *gpus[GPU_NODE_MAX];
	uint64_t limits[GPU_NODE_MAX];
	unsigned *devs = NULL, order[GPU_NODE_MAX], slot_units[GPU_NODE_MAX] = { 0 };
	const char *bad = NULL, *why = NULL;
	struct alloc_extra extra = { 0 };
	struct enforce_grant grant = { 0 };
	size_t n_gpus = 0;
	enum grpc_status st = GRPC_STATUS_OK;
	int n, r;

	if (q->n_devices_ids == 0) {
		(void)snprintf(msg, msgsz,
			       "invalid allocation request for \"%s\": no devices requested",
			       res->name);
		return GRPC_STATUS_INVALID_ARGUMENT;
	}
	devs = malloc(q->n_devices_ids * sizeof(*devs));
	if (!devs) {
		(void)snprintf(msg, msgsz, "out of memory");
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	}
	memset(seen, 0, nwords * sizeof(*seen));
	n = map_ids(p, q->devices_ids, q->n_devices_ids, seen, devs, &bad, &why);
	if (n < 0) {
		(void)snprintf(msg, msgsz, "invalid allocation request for \"%s\": %s: %s",
			       res->name, why, bad);
		st = GRPC_STATUS_INVALID_ARGUMENT;
		goto out;
	}
	if (res->kind == RESOURCE_REPLICA && res->fail_requests_gt_one && n > 1) {
		(void)snprintf(
			msg, msgsz,
			"invalid allocation request for \"%s\": invalid request: maximum request size for shared resources is 1; found %d",
			res->name, n);
		st = GRPC_STATUS_INVALID_ARGUMENT;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		unsigned s = resource_device_slot(res, devs[i]);

		/* The slot comes from the request's ID: never past the arrays, whatever built @res. */
		if (s >= ELEMENTSOF(slot_units)) {
			(void)snprintf(
				msg, msgsz,
				"cannot allocate for \"%s\": device %s is on GPU slot %u, past the %d GPUs one node is built for",
				res->name, q->devices_ids[i], s, GPU_NODE_MAX);
			st = GRPC_STATUS_INTERNAL;
			goto out;
		}
		if (!plugin_gpu_up(p, res->gpus[s].gpu)) {
			char id[128];

			resource_device_id(res, devs[i], id);
			(void)snprintf(
				msg, msgsz,
				"invalid allocation request for \"%s\": device %s is unhealthy (GPU %u)",
				res->name, id, res->gpus[s].gpu);
			st = GRPC_STATUS_INVALID_ARGUMENT;
			goto out;
		}
		/* Whole GPUs in the order the request first names them (NVIDIA keeps it), each once. */
		if (slot_units[s]++ == 0)
			order[n_gpus++] = s;
	}
	/*
	 * Replicas and units come in the kubelet's set order, which is random: deliver their GPUs
	 * in index order so CUDA device 0 (and CUDA_DEVICE_MEMORY_LIMIT_0) is stable.
	 */
	if (res->kind != RESOURCE_GPU)
		for (size_t k = 1; k < n_gpus; k++)
			for (size_t j = k; j > 0 && order[j - 1] > order[j]; j--) {
				unsigned t = order[j];

				order[j] = order[j - 1];
				order[j - 1] = t;
			}
	for (size_t k = 0; k < n_gpus; k++) {
		gpus[k] = &p->ctx->info->devices[res->gpus[order[k]].gpu];
		limits[k] = (uint64_t)slot_units[order[k]] * res->unit_mib;
	}
	if (res->kind == RESOURCE_GPUMEM) {
		if (n_gpus > 1 && !p->ctx->split_allow) {
			(void)snprintf(
				msg, msgsz,
				"gpumem request of %d units (%llu MiB) spans %zu GPUs and onSplit is reject: a container's nvidia.com/gpumem must come from one GPU; retry the pod, or set edgegpu.sharing.memory.onSplit: allow",
				n, (unsigned long long)n * res->unit_mib, n_gpus);
			st = GRPC_STATUS_FAILED_PRECONDITION;
			goto out;
		}
		extra.mem_limit_mib = limits;
		if (p->ctx->enforce) {
			/* Never fails for the files: a grant that cannot hold says so instead. */
			r = enforce_allocate(p->ctx->enforce, p->ctx->info, res->name,
					     q->devices_ids, q->n_devices_ids, gpus, limits, n_gpus,
					     &grant);
			if (r < 0) {
				(void)snprintf(msg, msgsz, "gpumem enforcement failed: %s",
					       strerror(-r));
				st = grpc_status_from_errno(r);
				goto out;
			}
			extra.env = (const char *const *)grant.env;
			extra.n_env = grant.n_env;
			extra.mounts = grant.mounts;
			extra.n_mounts = grant.n_mounts;
		}
	}
	r = alloc_response_new(&p->ctx->alloc, gpus, n_gpus, &extra, ret);
	if (r < 0) {
		(void)snprintf(msg, msgsz, "building the allocate response failed: %s",
			       strerror(-r));
		st = grpc_status_from_errno(r);
		goto out;
	}
	if (res->kind == RESOURCE_GPUMEM)
		remember_alloc(p, devs, (size_t)n);
out:
	enforce_grant_release(&grant);
	free(devs);
	return st;
}

const double plugin_alloc_bounds[PLUGIN_ALLOC_BUCKETS] = {
	50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3,
};

static void record_latency(struct plugin *p, usec_t dur)
{
	double s = (double)dur / USEC_PER_SEC;
	unsigned b = 0;

	while (b < PLUGIN_ALLOC_BUCKETS && s > plugin_alloc_bounds[b])
		b++;
	p->stats.alloc_hist[b]++;
	p->stats.alloc_seconds += s;
}

void plugin_handle_allocate(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct plugin *p = userdata;
	V1beta1__AllocateRequest *m;
	V1beta1__AllocateResponse out = V1BETA1__ALLOCATE_RESPONSE__INIT;
	V1beta1__ContainerAllocateResponse **crs = NULL;
	size_t nwords = BITMAP_WORDS(p->res->n_devices) + 1;
	uint64_t *seen = NULL;
	char msg[1024];

	usec_t t0 = now_usec();
	int r;

	p->stats.allocates++;
	/*
	 * While no valid CDI spec exists, CDI names resolve nowhere: every container would fail
	 * at creation. Refuse, saying why, until the daemon has written the spec.
	 */
	if (p->ctx->cdi_error && *p->ctx->cdi_error && alloc_uses_cdi(&p->ctx->alloc)) {
		p->stats.allocate_errors++;
		plugin_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "no valid CDI spec: %s",
			    *p->ctx->cdi_error);
		return;
	}
	r = alloc_request_unpack(req, len, &m, msg, sizeof(msg));
	if (r < 0) {
		p->stats.allocate_errors++;
		if (r == -ENOMEM)
			plugin_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
				    "out of memory decoding the AllocateRequest");
		else if (r == -EINVAL)
			plugin_fail(
				call, GRPC_STATUS_INVALID_ARGUMENT,
				"invalid allocation request for \"%s\": device ID with a NUL byte: %s",
				p->res->name, msg);
		else
			plugin_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
				    "malformed AllocateRequest");
		return;
	}
	if (m->n_container_requests == 0) {
		p->stats.allocate_errors++;
		plugin_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
			    "AllocateRequest for \"%s\" has no container requests", p->res->name);
		goto out;
	}
	crs = calloc(m->n_container_requests + 1, sizeof(V1beta1__ContainerAllocateResponse *));
	seen = malloc(nwords * sizeof(*seen));
	if (!crs || !seen) {
		plugin_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	out.container_responses = crs;
	for (size_t c = 0; c < m->n_container_requests; c++) {
		enum grpc_status st = allocate_one(p, m->container_requests[c], seen, nwords,
						   &crs[c], msg, sizeof(msg));

		if (st != GRPC_STATUS_OK) {
			p->stats.allocate_errors++;
			plugin_fail(call, st, "%s", msg);
			goto out;
		}
		out.n_container_responses++;
	}
	plugin_reply(call, &out.base);
	record_latency(p, now_usec() - t0);
	log_debug("allocate", "resource=%s containers=%zu bytes=%zu dur_us=%llu", p->res->name,
		  m->n_container_requests, len, (unsigned long long)(now_usec() - t0));
	if (p->res->kind == RESOURCE_GPUMEM && p->ctx->mask)
		plugin_refresh(p);
out:
	for (size_t c = 0; crs && c < out.n_container_responses; c++)
		alloc_response_free(crs[c]);
	free(crs);
	free(seen);
	v1beta1__allocate_request__free_unpacked(m, NULL);
}
