/*
 * backstop.c: the node-side kill policy's state machine (backstop.h). Pure: no I/O, no clock.
 */
#include "backstop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* A (container, GPU) above its threshold, and since when. */
struct watch {
	char key[BACKSTOP_KEY_MAX];
	char uuid[GPU_UUID_MAX];
	usec_t since;
};

struct backstop {
	struct backstop_opts o;
	struct watch *w;
	size_t n;
};

bool backstop_over(uint64_t used, uint64_t limit, unsigned tolerance_percent)
{
	/* limit x tolerance overflows 64 bits for limits past 2^57: compare in 128. */
	return (unsigned __int128)used * 100 > (unsigned __int128)limit * tolerance_percent;
}

int backstop_new(const struct backstop_opts *o, struct backstop **ret)
{
	struct backstop *b;

	if (o->tolerance_percent < 100)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->o = *o;
	*ret = b;
	return 0;
}

int backstop_set_opts(struct backstop *b, const struct backstop_opts *o)
{
	if (o->tolerance_percent < 100)
		return -EINVAL;
	b->o = *o;
	return 0;
}

struct backstop *backstop_free(struct backstop *b)
{
	if (b) {
		free(b->w);
		free(b);
	}
	return NULL;
}

void backstop_forget(struct backstop *b)
{
	b->w = mfree(b->w);
	b->n = 0;
}

size_t backstop_watched(const struct backstop *b)
{
	return b->n;
}

static const struct watch *find(const struct backstop *b, const char *key, const char *uuid)
{
	for (size_t i = 0; i < b->n; i++)
		if (streq(b->w[i].key, key) && streq(b->w[i].uuid, uuid))
			return &b->w[i];
	return NULL;
}

/* The largest process with a PID, or -1. Unknown usage counts as 0: it is not known larger. */
static ssize_t largest(const struct backstop_sample *s)
{
	ssize_t best = -1;
	uint64_t best_used = 0;

	for (size_t i = 0; i < s->n_procs; i++) {
		uint64_t u = s->procs[i].used == UINT64_MAX ? 0 : s->procs[i].used;

		if (s->procs[i].pid == 0)
			continue;
		if (best < 0 || u > best_used) {
			best = (ssize_t)i;
			best_used = u;
		}
	}
	return best;
}

int backstop_round(struct backstop *b, const struct backstop_sample *s, size_t n, usec_t now,
		   struct backstop_decision *ret)
{
	struct watch *w = calloc(MIN(n, (size_t)BACKSTOP_TRACK_MAX) + 1, sizeof(*w));
	size_t k = 0, due = SIZE_MAX;
	const struct backstop_sample *ds = NULL;
	ssize_t p;

	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < n && k < BACKSTOP_TRACK_MAX; i++) {
		const struct watch *old;

		if (!s[i].limit || !backstop_over(s[i].used, s[i].limit, b->o.tolerance_percent))
			continue;
		if (strlen(s[i].key) >= BACKSTOP_KEY_MAX || strlen(s[i].uuid) >= GPU_UUID_MAX)
			continue; /* cannot be told apart from another once cut: never acted on */
		old = find(b, s[i].key, s[i].uuid);
		(void)snprintf(w[k].key, sizeof(w[k].key), "%s", s[i].key);
		(void)snprintf(w[k].uuid, sizeof(w[k].uuid), "%s", s[i].uuid);
		w[k].since = old && old->since <= now ? old->since : now;
		if (now - w[k].since >= b->o.after && largest(&s[i]) >= 0 &&
		    (due == SIZE_MAX || w[k].since < w[due].since)) {
			due = k;
			ds = &s[i];
		}
		k++;
	}
	free(b->w);
	b->w = w;
	b->n = k;
	if (due == SIZE_MAX)
		return 0;
	p = largest(ds);
	*ret = (struct backstop_decision){
		.pid = ds->procs[p].pid,
		.start_time = ds->procs[p].start_time,
		.proc_used = ds->procs[p].used == UINT64_MAX ? 0 : ds->procs[p].used,
		.used = ds->used,
		.limit = ds->limit,
		.over_for = now - w[due].since,
	};
	(void)snprintf(ret->key, sizeof(ret->key), "%s", ds->key);
	(void)snprintf(ret->uuid, sizeof(ret->uuid), "%s", ds->uuid);
	w[due].since = now; /* the next kill of this pair needs `after` again */
	return 1;
}
