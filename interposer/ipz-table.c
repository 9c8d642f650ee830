/*
 * The per-process table of what the interposer counted: (kind, pointer or handle) -> (gpu,
 * bytes, extra). Chained hash under one mutex. Nodes come from slabs of 256 (one malloc per
 * 256 live entries, none per call once warm); the bucket array starts static and doubles (one
 * malloc) when the table holds twice as many entries as buckets. Freed nodes go to a free list
 * and are reused; nothing is returned to malloc (a process's peak is small).
 */

#include <errno.h>
#include <stdlib.h>

#include "glibc-floor.h"
#include "ipz-int.h"

#define SLAB	      256
#define BUCKETS_FIRST 1024

struct node {
	struct node *next;
	uint64_t key;
	unsigned kind;
	struct ipz_entry e;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *first_buckets[BUCKETS_FIRST];
static struct node **buckets = first_buckets;
static size_t n_buckets = BUCKETS_FIRST; /* a power of two */
static size_t n_entries;
static struct node *free_nodes;

static size_t bucket_of(unsigned kind, uint64_t key, size_t n)
{
	uint64_t h = (key ^ ((uint64_t)kind << 56)) * UINT64_C(0x9e3779b97f4a7c15);

	return (size_t)(h >> 32) & (n - 1);
}

static struct node **find(unsigned kind, uint64_t key)
{
	struct node **pp = &buckets[bucket_of(kind, key, n_buckets)];

	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->key == key && (*pp)->kind == kind)
			return pp;
	return NULL;
}

/* Doubles the buckets; a failed malloc keeps the longer chains (still correct). */
static void grow(void)
{
	size_t n = n_buckets * 2, i;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	struct node **b = calloc(n, sizeof(*b));

	if (!b)
		return;
	for (i = 0; i < n_buckets; i++) {
		struct node *x = buckets[i], *next;

		for (; x; x = next) {
			size_t j = bucket_of(x->kind, x->key, n);

			next = x->next;
			x->next = b[j];
			b[j] = x;
		}
	}
	if (buckets != first_buckets)
		free(buckets);
	buckets = b;
	n_buckets = n;
}

static struct node *node_new(void)
{
	struct node *x;
	unsigned i;

	if (!free_nodes) {
		x = malloc(SLAB * sizeof(*x));
		if (!x)
			return NULL;
		for (i = 0; i < SLAB; i++) {
			x[i].next = free_nodes;
			free_nodes = &x[i];
		}
	}
	x = free_nodes;
	free_nodes = x->next;
	return x;
}

int ipz_table_put(enum ipz_kind kind, uint64_t key, const struct ipz_entry *e)
{
	struct node *x;
	size_t b;
	int r = 0;

	pthread_mutex_lock(&lock);
	if (find(kind, key)) {
		r = -EEXIST;
		goto out;
	}
	x = node_new();
	if (!x) {
		r = -ENOMEM;
		goto out;
	}
	x->kind = kind;
	x->key = key;
	x->e = *e;
	b = bucket_of(kind, key, n_buckets);
	x->next = buckets[b];
	buckets[b] = x;
	if (++n_entries > 2 * n_buckets)
		grow();
out:
	pthread_mutex_unlock(&lock);
	return r;
}

bool ipz_table_take(enum ipz_kind kind, uint64_t key, struct ipz_entry *ret)
{
	struct node **pp, *x;

	pthread_mutex_lock(&lock);
	pp = find(kind, key);
	if (pp) {
		x = *pp;
		*ret = x->e;
		*pp = x->next;
		x->next = free_nodes;
		free_nodes = x;
		n_entries--;
	}
	pthread_mutex_unlock(&lock);
	return pp != NULL;
}

bool ipz_table_get(enum ipz_kind kind, uint64_t key, struct ipz_entry *ret)
{
	struct node **pp;

	pthread_mutex_lock(&lock);
	pp = find(kind, key);
	if (pp)
		*ret = (*pp)->e;
	pthread_mutex_unlock(&lock);
	return pp != NULL;
}

/* Sets the bytes (or with @extra the extra) of a present entry to @v; false when absent. */
static bool set_field(enum ipz_kind kind, uint64_t key, bool extra, uint64_t v)
{
	struct node **pp;

	pthread_mutex_lock(&lock);
	pp = find(kind, key);
	if (pp)
		*(extra ? &(*pp)->e.extra : &(*pp)->e.bytes) = v;
	pthread_mutex_unlock(&lock);
	return pp != NULL;
}

bool ipz_table_set_bytes(enum ipz_kind kind, uint64_t key, uint64_t bytes)
{
	return set_field(kind, key, false, bytes);
}

bool ipz_table_set_extra(enum ipz_kind kind, uint64_t key, uint64_t extra)
{
	return set_field(kind, key, true, extra);
}

void ipz_table_lock(void)
{
	pthread_mutex_lock(&lock);
}

void ipz_table_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

/* The child has one thread: the lock the parent held for it is made new. */
void ipz_table_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	lock = fresh;
}
