#pragma once

/*
 * What enforce.c (the state, install, read-back, removal) and enforce-alloc.c (Allocate's
 * grant) share. Private to src/enforce/. Loop thread only, as enforce.h.
 */

#include "config.h"
#include "enforce.h"

#define ENFORCE_LIB_NAME     "libedgegpu-cuda.so"
#define ENFORCE_PRELOAD_NAME "ld.so.preload"
#define ENFORCE_NAME_LEN     16
/* alloc/.new-<name>/: a directory being built (removed at start: a crash left it) */
#define ENFORCE_NEW_PREFIX ".new-"
/* alloc/<name>/state/region is three levels: a deeper tree is not ours to walk. */
#define ENFORCE_TREE_DEPTH 8
#define ENFORCE_GRACE	   (120 * USEC_PER_SEC)

/* One gpumem container allocation (with or without its directory). */
struct ealloc {
	struct ealloc *next;
	struct enforce_alloc view; /* points into the fields below */
	char name[ENFORCE_NAME_LEN + 1];
	char *resource;
	char **ids;
	size_t n_ids;
	char **uuids;
	uint64_t *limit_mib;
	unsigned n_gpus;
	char *state_dir; /* alloc/<name>/state, or NULL */
	usec_t created;	 /* now_usec() clock */
};

struct enforce {
	struct config_enforcement cfg; /* library and state_dir owned */
	char *host_root;
	struct enforce_node node;
	char *lib_dir, *alloc_dir, *lib_path, *preload_path;
	bool installed;
	int install_err;	   /* the last install failure logged (0: none) */
	int write_err;		   /* the last allocation-write failure logged (0: none) */
	const char *logged_reason; /* the last per-container verdict logged */
	enum enforce_mode logged_mode;
	bool logged_any;
	usec_t grace;
	struct ealloc *allocs;
	size_t n_allocs;
};

/* Frees @a's fields and @a. NULL-safe. */
void ealloc_free(struct ealloc *a);
/* Fills a->view from a's fields (after they are set or moved). */
void ealloc_fill_view(struct ealloc *a);
/* Removes alloc/<name>/ (when a->name is set), unlinks @a from @e and frees it. */
void enforce_remove(struct enforce *e, struct ealloc *a);
/* Removes every allocation of @resource holding one of @ids (a unit is held once). */
int enforce_remove_holders(struct enforce *e, const char *resource, char *const *ids, size_t n_ids);
/* Opens alloc/ (O_PATH-free directory fd, links not followed). Returns the fd or -errno. */
int enforce_alloc_dir_open(const struct enforce *e);
