#include "resource.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gpu.h"

#define DEFAULT_MAX_LIST_BYTES ((size_t)3 << 20)
#define GPU_LETTERS	       26

static const char b36[] = "0123456789abcdefghijklmnopqrstuvwxyz";

struct resource *resource_free(struct resource *r)
{
	if (!r)
		return NULL;
	for (unsigned i = 0; r->uuids && i < r->n_gpus; i++)
		free(r->uuids[i]);
	free(r->uuids);
	free(r->gpus);
	free(r->socket);
	free(r->name);
	free(r);
	return NULL;
}

static int cmp_uuid_slot(const void *a, const void *b, void *arg)
{
	const struct resource *r = arg;
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return strcmp(r->uuids[x], r->uuids[y]);
}

/*
 * Letters stay stable for a given set of UUIDs: each GPU hashes its UUID to a preferred letter
 * and probes forward on collision, in UUID order.
 */
static void assign_letters(struct resource *r)
{
	unsigned order[GPU_LETTERS];
	bool used[GPU_LETTERS] = { false };

	for (unsigned i = 0; i < r->n_gpus; i++)
		order[i] = i;
	qsort_r(order, r->n_gpus, sizeof(order[0]), cmp_uuid_slot, r);
	for (unsigned k = 0; k < r->n_gpus; k++) {
		unsigned l = fnv1a(r->uuids[order[k]]) % GPU_LETTERS;

		while (used[l])
			l = (l + 1) % GPU_LETTERS;
		used[l] = true;
		r->gpus[order[k]].letter = (char)('a' + l);
	}
}

static unsigned b36_len(unsigned v)
{
	unsigned n = 1;

	while (v >= 36) {
		v /= 36;
		n++;
	}
	return n;
}

static unsigned varint_len(uint64_t v)
{
	unsigned n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t topo_len(int numa)
{
	/* TopologyInfo{nodes:[NUMANode{ID}]}: NUMANode ID 0 is an empty sub-message. */
	size_t node = numa > 0 ? 1 + varint_len((uint64_t)numa) : 0;
	size_t topo = 1 + varint_len(node) + node;

	return topo;
}

static size_t device_msg_len(size_t id_len, size_t health_len, int numa)
{
	size_t d = 1 + varint_len(id_len) + id_len + 1 + varint_len(health_len) + health_len;

	if (numa >= 0) {
		size_t t = topo_len(numa);

		d += 1 + varint_len(t) + t;
	}
	return d;
}

size_t resource_list_size(const struct resource *r, const int *numa)
{
	size_t total = 0;
	char id[128];

	for (unsigned s = 0; s < r->n_gpus; s++) {
		const struct resource_gpu *g = &r->gpus[s];
		int n = r->kind == RESOURCE_GPUMEM || !numa ? -1 : numa[g->gpu];

		if (r->kind == RESOURCE_GPUMEM) {
			/* IDs grow one base-36 digit at a time: count each length band at once. */
			unsigned off = 0;

			while (off < g->count) {
				unsigned len = b36_len(off), end = g->count, cap = 1;
				size_t d;

				for (unsigned i = 0; i < len; i++)
					cap *= 36;
				if (cap < end)
					end = cap;
				d = device_msg_len(1 + len, 7, -1);
				total += (size_t)(end - off) * (1 + varint_len(d) + d);
				off = end;
			}
			continue;
		}
		for (unsigned i = 0; i < g->count; i++) {
			size_t d = device_msg_len(resource_device_id(r, g->first + i, id), 7, n);

			total += 1 + varint_len(d) + d;
		}
	}
	return total;
}

int resource_new(const struct resource_spec *spec, const struct gpu_info *info,
		 struct resource **ret, char **reterr)
{
	struct resource *r;
	unsigned next = 0;
	int e = -ENOMEM;

	if (spec->n_gpus == 0)
		return set_error(reterr, -EINVAL, "resource \"%s\" has no GPUs", spec->name);
	if (spec->n_gpus > GPU_NODE_MAX)
		return set_error(
			reterr, -EINVAL,
			"resource \"%s\" has %u GPUs, more than the %d one node is built for",
			spec->name, spec->n_gpus, GPU_NODE_MAX);
	for (unsigned s = 0; spec->kind == RESOURCE_REPLICA && s < spec->n_gpus; s++) {
		unsigned n = spec->gpu_replicas ? spec->gpu_replicas[s] : spec->replicas;

		if (n < 2)
			return set_error(
				reterr, -EINVAL,
				"resource \"%s\": replicas must be at least 2, got %u for GPU %u",
				spec->name, n, spec->gpus[s]);
	}
	if (spec->kind == RESOURCE_GPUMEM && spec->unit_mib == 0)
		return set_error(reterr, -EINVAL, "resource \"%s\": unitMiB must be at least 1",
				 spec->name);
	if (spec->kind == RESOURCE_GPUMEM && spec->n_gpus > GPU_LETTERS)
		return set_error(reterr, -EINVAL,
				 "resource \"%s\": at most %d GPUs can share memory", spec->name,
				 GPU_LETTERS);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->kind = spec->kind;
	r->replicas = 1;
	r->fail_requests_gt_one = spec->fail_requests_gt_one;
	r->unit_mib = r->unit_mib_asked = spec->unit_mib;
	r->reserve_mib = spec->reserve_mib;
	r->name = strdup(spec->name);
	r->socket = config_socket_name(spec->name);
	r->gpus = calloc(spec->n_gpus, sizeof(*r->gpus));
	r->uuids = calloc(spec->n_gpus, sizeof(*r->uuids));
	if (!r->name || !r->socket || !r->gpus || !r->uuids)
		goto fail;
	r->n_gpus = spec->n_gpus;
	for (unsigned s = 0; s < spec->n_gpus; s++) {
		unsigned gi = spec->gpus[s];

		if (gi >= info->n_devices) {
			e = set_error(reterr, -EINVAL, "resource \"%s\": GPU %u does not exist",
				      spec->name, gi);
			goto fail;
		}
		/* Slots are kept in GPU index order: preferred-allocation ties go to lower indices. */
		if (s > 0 && gi <= spec->gpus[s - 1]) {
			e = set_error(reterr, -EINVAL,
				      "resource \"%s\": GPU list must be sorted and unique",
				      spec->name);
			goto fail;
		}
		r->gpus[s].gpu = gi;
		r->uuids[s] = strdup(info->devices[gi].uuid);
		if (!r->uuids[s])
			goto fail;
	}
	if (r->kind == RESOURCE_GPUMEM) {
		size_t cap = spec->max_list_bytes ? spec->max_list_bytes : DEFAULT_MAX_LIST_BYTES;

		for (unsigned s = 0; s < r->n_gpus; s++) {
			uint64_t mib = info->devices[r->gpus[s].gpu].mem_total >> 20;

			if (mib <= r->reserve_mib) {
				e = set_error(
					reterr, -EINVAL,
					"resource \"%s\": reserveMiB %llu is not smaller than GPU %u's memory (%llu MiB)",
					spec->name, (unsigned long long)r->reserve_mib,
					r->gpus[s].gpu, (unsigned long long)mib);
				goto fail;
			}
		}
		assign_letters(r);
		for (size_t i = 0; i < ELEMENTSOF(r->letter_slot); i++)
			r->letter_slot[i] = -1;
		for (unsigned s = 0; s < r->n_gpus; s++)
			r->letter_slot[r->gpus[s].letter - 'a'] = (int16_t)s;
		for (;;) {
			next = 0;
			for (unsigned s = 0; s < r->n_gpus; s++) {
				uint64_t mib = info->devices[r->gpus[s].gpu].mem_total >> 20;
				uint64_t units = (mib - r->reserve_mib) / r->unit_mib;

				if (units > 60000000)
					units = 60000000; /* 5 base-36 digits */
				r->gpus[s].first = next;
				r->gpus[s].count = (unsigned)units;
				next += (unsigned)units;
			}
			r->n_devices = next;
			if (resource_list_size(r, NULL) <= cap ||
			    r->unit_mib >= ((uint64_t)1 << 40))
				break;
			r->unit_mib *= 2;
		}
		if (r->n_devices == 0) {
			e = set_error(reterr, -EINVAL,
				      "resource \"%s\": unit of %llu MiB leaves no units",
				      spec->name, (unsigned long long)r->unit_mib);
			goto fail;
		}
	} else {
		for (unsigned s = 0; s < r->n_gpus; s++) {
			unsigned count = 1;

			if (r->kind == RESOURCE_REPLICA)
				count = spec->gpu_replicas ? spec->gpu_replicas[s] : spec->replicas;
			if (count > UINT_MAX - next) {
				e = set_error(reterr, -EINVAL, "resource \"%s\": too many replicas",
					      spec->name);
				goto fail;
			}
			r->gpus[s].first = next;
			r->gpus[s].count = count;
			next += count;
			if (count > r->replicas)
				r->replicas = count;
		}
		r->n_devices = next;
	}
	*ret = r;
	return 0;
fail:
	resource_free(r);
	return e;
}

unsigned resource_device_slot(const struct resource *r, unsigned i)
{
	unsigned lo = 0, hi = r->n_gpus;

	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;

		if (r->gpus[mid].first <= i)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The ID of the @off-th device of slot @s. */
static size_t slot_device_id(const struct resource *r, unsigned s, unsigned off, char *buf)
{
	char tmp[8];
	size_t n = 0;

	switch (r->kind) {
	case RESOURCE_GPU:
		return (size_t)snprintf(buf, 128, "%s", r->uuids[s]);
	case RESOURCE_REPLICA:
		return (size_t)snprintf(buf, 128, "%s::%u", r->uuids[s], off);
	case RESOURCE_GPUMEM:
	default:
		do {
			tmp[n++] = b36[off % 36];
			off /= 36;
		} while (off);
		buf[0] = r->gpus[s].letter;
		for (size_t k = 0; k < n; k++)
			buf[1 + k] = tmp[n - 1 - k];
		buf[1 + n] = 0;
		return 1 + n;
	}
}

size_t resource_device_id(const struct resource *r, unsigned i, char *buf)
{
	unsigned s = resource_device_slot(r, i);

	return slot_device_id(r, s, i - r->gpus[s].first, buf);
}

static int slot_by_uuid(const struct resource *r, const char *id, size_t len)
{
	for (unsigned s = 0; s < r->n_gpus; s++)
		if (strlen(r->uuids[s]) == len && memcmp(r->uuids[s], id, len) == 0)
			return (int)s;
	return -ENOENT;
}

int resource_device_lookup(const struct resource *r, const char *id, size_t len)
{
	int s;

	switch (r->kind) {
	case RESOURCE_GPU:
		s = slot_by_uuid(r, id, len);
		return s < 0 ? s : (int)r->gpus[s].first;
	case RESOURCE_REPLICA: {
		const char *sep = NULL;
		unsigned n = 0;

		for (size_t i = 0; i + 1 < len; i++)
			if (id[i] == ':' && id[i + 1] == ':')
				sep = id + i;
		if (!sep || sep + 2 == id + len)
			return -ENOENT;
		for (const char *p = sep + 2; p < id + len; p++) {
			if (*p < '0' || *p > '9' || n > 100000000 ||
			    (p == sep + 2 && *p == '0' && p + 1 < id + len))
				return -ENOENT;
			n = n * 10 + (unsigned)(*p - '0');
		}
		s = slot_by_uuid(r, id, (size_t)(sep - id));
		if (s < 0 || n >= r->gpus[s].count)
			return -ENOENT;
		return (int)(r->gpus[s].first + n);
	}
	case RESOURCE_GPUMEM:
	default: {
		uint64_t off = 0;

		/* The hot path of a 163,840-ID request: no searching, no allocation. */
		if (len < 2 || len > 6 || (id[1] == '0' && len > 2) || id[0] < 'a' || id[0] > 'z')
			return -ENOENT;
		s = r->letter_slot[(unsigned char)id[0] - 'a'];
		if (s < 0)
			return -ENOENT;
		for (size_t i = 1; i < len; i++) {
			char c = id[i];
			unsigned v;

			if (c >= '0' && c <= '9')
				v = (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'z')
				v = (unsigned)(c - 'a') + 10;
			else
				return -ENOENT;
			off = off * 36 + v;
		}
		if (off >= r->gpus[s].count)
			return -ENOENT;
		return (int)(r->gpus[s].first + off);
	}
	}
}

static void put_varint(uint8_t **p, uint64_t v)
{
	while (v >= 0x80) {
		*(*p)++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*(*p)++ = (uint8_t)v;
}

int resource_encode_list(const struct resource *r, const int *numa, resource_health_fn *health,
			 void *userdata, struct buf *out)
{
	char id[128];
	uint8_t *p;
	int e;

	/* Room for every device as "Unhealthy" (2 bytes longer than "Healthy", same varints). */
	out->len = 0;
	e = buf_reserve(out, resource_list_size(r, numa) + (size_t)r->n_devices * 2 + 64);
	if (e < 0)
		return e;
	p = out->data;
	for (unsigned s = 0; s < r->n_gpus; s++) {
		const struct resource_gpu *g = &r->gpus[s];
		int n = r->kind == RESOURCE_GPUMEM || !numa ? -1 : numa[g->gpu];

		for (unsigned i = 0; i < g->count; i++) {
			size_t idl = slot_device_id(r, s, i, id);
			bool ok = health(r, g->first + i, userdata);
			const char *h = ok ? "Healthy" : "Unhealthy";
			size_t hl = ok ? 7 : 9, d = device_msg_len(idl, hl, n);

			*p++ = 0x0a;
			put_varint(&p, d);
			*p++ = 0x0a;
			put_varint(&p, idl);
			memcpy(p, id, idl);
			p += idl;
			*p++ = 0x12;
			put_varint(&p, hl);
			memcpy(p, h, hl);
			p += hl;
			if (n >= 0) {
				size_t t = topo_len(n),
				       node = n > 0 ? 1 + varint_len((uint64_t)n) : 0;

				*p++ = 0x1a;
				put_varint(&p, t);
				*p++ = 0x0a;
				put_varint(&p, node);
				if (n > 0) {
					*p++ = 0x08;
					put_varint(&p, (uint64_t)n);
				}
			}
		}
	}
	out->len = (size_t)(p - out->data);
	return 0;
}

/* --- preferred allocation --- */

static long pair_cost(const struct resource_pref_ctx *ctx, unsigned a, unsigned b)
{
	long c = 0;

	/* A NUMA crossing outweighs any PCI distance. */
	if (ctx->numa && ctx->numa[a] >= 0 && ctx->numa[b] >= 0 && ctx->numa[a] != ctx->numa[b])
		c += 1000000;
	if (ctx->distance && a < ctx->n_all && b < ctx->n_all)
		c += ctx->distance[a * ctx->n_all + b];
	return c;
}

/* Whole GPUs: enumerate combinations (small nodes) and keep the best-connected one. */
static int preferred_gpu(const struct resource *r, const struct resource_pref_ctx *ctx,
			 const uint64_t *cand, const unsigned *must, size_t n_must, unsigned size,
			 unsigned *ret)
{
	/* A whole-GPU resource has one device per GPU: GPU_NODE_MAX at most (resource_new()). */
	unsigned c[GPU_NODE_MAX], nc = 0, need, idx[GPU_NODE_MAX], best[GPU_NODE_MAX];
	long best_score = -1;
	size_t out = 0;

	for (size_t i = 0; i < n_must; i++)
		ret[out++] = must[i];
	for (unsigned i = 0; i < r->n_devices && nc < ELEMENTSOF(c); i++)
		if (bitmap_test(cand, i))
			c[nc++] = i;
	need = size - (unsigned)n_must;
	if (need == 0)
		return (int)out;
	if (nc <= need) {
		for (unsigned i = 0; i < nc; i++)
			ret[out++] = c[i];
		return (int)out;
	}
	if (nc > 16) {
		for (unsigned i = 0; i < need; i++)
			ret[out++] = c[i];
		return (int)out;
	}
	for (unsigned i = 0; i < need; i++)
		idx[i] = i;
	for (;;) {
		long score = 0;

		for (unsigned i = 0; i < need; i++) {
			unsigned gi = resource_device_gpu(r, c[idx[i]]);

			for (size_t m = 0; m < n_must; m++)
				score += pair_cost(ctx, gi, resource_device_gpu(r, must[m]));
			for (unsigned j = i + 1; j < need; j++)
				score += pair_cost(ctx, gi, resource_device_gpu(r, c[idx[j]]));
		}
		if (best_score < 0 || score < best_score) {
			best_score = score;
			memcpy(best, idx, need * sizeof(idx[0]));
		}
		/* next combination in lexicographic order */
		int k = (int)need - 1;

		while (k >= 0 && idx[k] == nc - need + (unsigned)k)
			k--;
		if (k < 0)
			break;
		idx[k]++;
		for (unsigned j = (unsigned)k + 1; j < need; j++)
			idx[j] = idx[j - 1] + 1;
	}
	for (unsigned i = 0; i < need; i++)
		ret[out++] = c[best[i]];
	return (int)out;
}

/*
 * Replicas: the least-used physical GPU first (NVIDIA's distributed policy). With per-GPU
 * replica counts, "used" is the fraction of the GPU's own replicas taken, so a GPU shared two
 * ways with one replica taken is as busy as one shared four ways with two taken; with equal
 * counts this orders GPUs exactly as NVIDIA's count of taken replicas does. Ties go to the GPU
 * with fewer replicas taken, then to the lower index; on a GPU, the lowest replica first.
 */
static int preferred_replica(const struct resource *r, uint64_t *cand, const unsigned *must,
			     size_t n_must, unsigned size, unsigned *ret)
{
	size_t out = 0;

	for (size_t i = 0; i < n_must; i++)
		ret[out++] = must[i];
	while (out < size) {
		int pick = -1;
		unsigned pick_used = 0, pick_count = 1, pick_dev = 0;

		for (unsigned s = 0; s < r->n_gpus; s++) {
			const struct resource_gpu *g = &r->gpus[s];
			unsigned avail = 0, first = 0, used;

			for (unsigned i = g->count; i-- > 0;)
				if (bitmap_test(cand, g->first + i)) {
					avail++;
					first = g->first + i;
				}
			if (avail == 0)
				continue;
			used = g->count - avail;
			/* used / count < pick_used / pick_count, without division */
			if (pick >= 0) {
				uint64_t a = (uint64_t)used * pick_count,
					 b = (uint64_t)pick_used * g->count;

				if (a > b || (a == b && used >= pick_used))
					continue;
			}
			pick = (int)s;
			pick_used = used;
			pick_count = g->count;
			pick_dev = first;
		}
		if (pick < 0)
			break;
		ret[out++] = pick_dev;
		bitmap_clear(cand, pick_dev);
	}
	return (int)out;
}

/* Memory units: all on one GPU, best fit. */
static int preferred_gpumem(const struct resource *r, const uint64_t *cand, const unsigned *must,
			    size_t n_must, unsigned size, unsigned *ret)
{
	unsigned free_units[GPU_LETTERS] = { 0 }, need = size - (unsigned)n_must;
	bool done[GPU_LETTERS] = { false };
	size_t out = 0;
	int home = -1;

	for (size_t i = 0; i < n_must; i++)
		ret[out++] = must[i];
	if (n_must)
		home = (int)resource_device_slot(r, must[0]);
	for (unsigned s = 0; s < r->n_gpus; s++) {
		const struct resource_gpu *g = &r->gpus[s];

		for (unsigned w = g->first / 64; w * 64 < g->first + g->count; w++) {
			uint64_t bits = cand[w];

			if (w * 64 < g->first)
				bits &= ~(uint64_t)0 << (g->first - w * 64);
			if ((w + 1) * 64 > g->first + g->count)
				bits &= ~(uint64_t)0 >> ((w + 1) * 64 - (g->first + g->count));
			free_units[s] += (unsigned)__builtin_popcountll(bits);
		}
	}
	while (out < size) {
		int s = home;

		home = -1;
		if (s < 0) {
			/* best fit: fewest free that still fits; else the largest */
			for (unsigned k = 0; k < r->n_gpus; k++)
				if (!done[k] && free_units[k] >= need &&
				    (s < 0 || free_units[k] < free_units[s]))
					s = (int)k;
			if (s < 0)
				for (unsigned k = 0; k < r->n_gpus; k++)
					if (!done[k] && free_units[k] > 0 &&
					    (s < 0 || free_units[k] > free_units[s]))
						s = (int)k;
			if (s < 0)
				break;
		}
		done[s] = true;
		for (unsigned i = 0; i < r->gpus[s].count && out < size; i++) {
			unsigned dev = r->gpus[s].first + i;

			if (bitmap_test(cand, dev)) {
				ret[out++] = dev;
				need--;
			}
		}
	}
	return (int)out;
}

int resource_preferred(const struct resource *r, const struct resource_pref_ctx *ctx,
		       const unsigned *available, size_t n_available, const unsigned *must,
		       size_t n_must, unsigned size, unsigned *ret)
{
	uint64_t *cand = NULL;
	int n;

	if (n_must > size)
		return -EINVAL;
	cand = calloc(BITMAP_WORDS(r->n_devices) + 1, sizeof(uint64_t));
	if (!cand)
		return -ENOMEM;
	for (size_t i = 0; i < n_available; i++)
		if (available[i] < r->n_devices)
			bitmap_set(cand, available[i]);
	for (size_t i = 0; i < n_must; i++) {
		if (must[i] >= r->n_devices) {
			free(cand);
			return -EINVAL;
		}
		bitmap_clear(cand, must[i]);
	}
	switch (r->kind) {
	case RESOURCE_GPU:
		n = preferred_gpu(r, ctx, cand, must, n_must, size, ret);
		break;
	case RESOURCE_REPLICA:
		n = preferred_replica(r, cand, must, n_must, size, ret);
		break;
	case RESOURCE_GPUMEM:
	default:
		n = preferred_gpumem(r, cand, must, n_must, size, ret);
		break;
	}
	free(cand);
	return n;
}
