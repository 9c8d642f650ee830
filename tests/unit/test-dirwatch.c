#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirwatch.h"
#include "file-read.h"
#include "loop.h"
#include "unit-fs.h"
#include "unit.h"

struct seen {
	struct dirwatch *dw;
	int n[DIRWATCH_RETRY + 1]; /* per kind */
	int total;
	uint32_t mask;
	char name[64];
	int error;
	const char *what;
	/* What the callback does. */
	enum dirwatch_kind free_on; /* frees the watch on this kind (with act) */
	bool act;
	int recreate_r;
};

static void on_event(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata)
{
	struct seen *s = userdata;

	assert_ptr_equal(dw, s->dw);
	s->n[ev->kind]++;
	s->total++;
	if (ev->kind == DIRWATCH_EVENT) {
		s->mask |= ev->mask;
		(void)snprintf(s->name, sizeof(s->name), "%s", ev->name);
	}
	if (ev->kind == DIRWATCH_RETRY) {
		s->error = ev->error;
		s->what = ev->what;
		assert_true(ev->failures >= 1);
	}
	if (s->act && ev->kind == s->free_on) {
		s->act = false;
		s->dw = dirwatch_free(s->dw);
	}
}

struct fx {
	char base[64];
	char dir[96];
	char file[128];
	struct loop *l;
};

static void fx_setup(struct fx *f)
{
	unit_tmpdir("test-dirwatch", f->base, sizeof(f->base));
	(void)snprintf(f->dir, sizeof(f->dir), "%s/d", f->base);
	assert_int_equal(loop_new(&f->l), 0);
}

static void fx_teardown(struct fx *f)
{
	loop_free(f->l);
	unit_rm_tree(f->base);
}

static void touch(const char *dir, const char *name)
{
	char p[160];
	FILE *fp;

	(void)snprintf(p, sizeof(p), "%s/%s", dir, name);
	fp = fopen(p, "w");
	assert_non_null(fp);
	(void)fclose(fp);
}

/* Runs the loop until @s->n[kind] reaches @want; bounded only for the failure case. */
static void wait_kind(struct fx *f, struct seen *s, enum dirwatch_kind kind, int want)
{
	for (int i = 0; i < 100 && s->n[kind] < want; i++)
		assert_int_equal(loop_run_once(f->l, 200 * USEC_PER_MSEC), 0);
	assert_int_equal(s->n[kind], want);
}

static void test_events_inside(void **state)
{
	struct fx f;
	struct seen s = { 0 };

	fx_setup(&f);
	assert_int_equal(mkdir(f.dir, 0755), 0);
	assert_int_equal(dirwatch_new(f.l, "", IN_CREATE, on_event, &s, &s.dw), -EINVAL);
	/* Trailing slashes are dropped. */
	(void)snprintf(f.file, sizeof(f.file), "%s//", f.dir);
	assert_int_equal(dirwatch_new(f.l, f.file, IN_CREATE, on_event, &s, &s.dw), 0);
	assert_string_equal(dirwatch_path(s.dw), f.dir);
	assert_true(dirwatch_present(s.dw));
	assert_false(dirwatch_polled(s.dw, NULL));
	touch(f.dir, "a");
	wait_kind(&f, &s, DIRWATCH_EVENT, 1);
	assert_string_equal(s.name, "a");
	assert_true(s.mask & IN_CREATE);
	assert_int_equal(s.total, 1);
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

/* Missing at the start, made, deleted, made again: BACK, GONE, BACK, events in between. */
static void test_gone_and_back(void **state)
{
	struct fx f;
	struct seen s = { 0 };

	fx_setup(&f);
	assert_int_equal(dirwatch_new(f.l, f.dir, IN_CREATE, on_event, &s, &s.dw), 0);
	assert_false(dirwatch_present(s.dw));
	assert_false(dirwatch_polled(s.dw, NULL)); /* its parent is watched */
	assert_int_equal(mkdir(f.dir, 0755), 0);
	wait_kind(&f, &s, DIRWATCH_BACK, 1);
	assert_true(dirwatch_present(s.dw));
	touch(f.dir, "x");
	wait_kind(&f, &s, DIRWATCH_EVENT, 1);
	(void)snprintf(f.file, sizeof(f.file), "%s/x", f.dir);
	assert_int_equal(unlink(f.file), 0);
	assert_int_equal(rmdir(f.dir), 0);
	wait_kind(&f, &s, DIRWATCH_GONE, 1);
	assert_false(dirwatch_present(s.dw));
	assert_int_equal(mkdir(f.dir, 0755), 0);
	wait_kind(&f, &s, DIRWATCH_BACK, 2);
	touch(f.dir, "y");
	wait_kind(&f, &s, DIRWATCH_EVENT, 2);
	assert_string_equal(s.name, "y");
	assert_int_equal(s.n[DIRWATCH_REPLACED] + s.n[DIRWATCH_RETRY], 0);
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

/* A ConfigMap's ..data swap: the path's symlink renamed over to another directory. */
static void test_symlink_swapped(void **state)
{
	struct fx f;
	struct seen s = { 0 };
	char a[96], b[96], tmp[96];

	fx_setup(&f);
	(void)snprintf(a, sizeof(a), "%s/a", f.base);
	(void)snprintf(b, sizeof(b), "%s/b", f.base);
	(void)snprintf(tmp, sizeof(tmp), "%s/tmp", f.base);
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(b, 0755), 0);
	assert_int_equal(symlink("a", f.dir), 0);
	assert_int_equal(dirwatch_new(f.l, f.dir, IN_CREATE, on_event, &s, &s.dw), 0);
	assert_int_equal(symlink("b", tmp), 0);
	assert_int_equal(rename(tmp, f.dir), 0);
	wait_kind(&f, &s, DIRWATCH_REPLACED, 1);
	assert_true(dirwatch_present(s.dw));
	touch(a, "old");
	touch(b, "new");
	wait_kind(&f, &s, DIRWATCH_EVENT, 1);
	assert_string_equal(s.name, "new");
	assert_int_equal(s.n[DIRWATCH_GONE], 0);
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

/* Its parent missing too: polled with backoff, and back once both are made. */
static void test_parent_missing_polled(void **state)
{
	struct fx f;
	struct seen s = { 0 };
	struct dirwatch_event ev;
	char deep[128];

	fx_setup(&f);
	(void)snprintf(deep, sizeof(deep), "%s/sub", f.dir);
	assert_int_equal(dirwatch_new(f.l, deep, IN_CREATE, on_event, &s, &s.dw), 0);
	assert_false(dirwatch_present(s.dw));
	assert_true(dirwatch_polled(s.dw, &ev));
	assert_int_equal(ev.kind, DIRWATCH_RETRY);
	assert_int_equal(ev.error, -ENOENT);
	assert_string_equal(ev.what, "parent");
	assert_int_equal(ev.failures, 1);
	/* The poll schedule: 100 ms, doubling (base/backoff.h) up to 10 s. */
	assert_int_equal(ev.retry_usec, 100 * USEC_PER_MSEC);
	/* The next looks say so too, growing. */
	wait_kind(&f, &s, DIRWATCH_RETRY, 1);
	assert_int_equal(s.error, -ENOENT);
	assert_true(dirwatch_polled(s.dw, &ev));
	assert_int_equal(ev.failures, 2);
	assert_true(ev.retry_usec > 100 * USEC_PER_MSEC);
	assert_int_equal(ev.retry_usec, 200 * USEC_PER_MSEC);
	assert_int_equal(mkdir(f.dir, 0755), 0);
	assert_int_equal(mkdir(deep, 0755), 0);
	wait_kind(&f, &s, DIRWATCH_BACK, 1);
	assert_false(dirwatch_polled(s.dw, NULL));
	touch(deep, "z");
	wait_kind(&f, &s, DIRWATCH_EVENT, 1);
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

/*
 * A file where the directory should be: not watched as one (IN_ONLYDIR); the parent is, and a
 * directory that takes the file's place is back.
 */
static void test_file_in_the_way(void **state)
{
	struct fx f;
	struct seen s = { 0 };

	fx_setup(&f);
	touch(f.base, "d");
	assert_int_equal(dirwatch_new(f.l, f.dir, IN_CREATE, on_event, &s, &s.dw), 0);
	assert_false(dirwatch_present(s.dw));
	assert_false(dirwatch_polled(s.dw, NULL));
	assert_int_equal(unlink(f.dir), 0);
	assert_int_equal(mkdir(f.dir, 0755), 0);
	wait_kind(&f, &s, DIRWATCH_BACK, 1);
	assert_true(dirwatch_present(s.dw));
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

/* The callback frees the watch on an event: the events after it are not delivered. */
static void test_freed_from_callback(void **state)
{
	struct fx f;
	struct seen s = { .free_on = DIRWATCH_EVENT, .act = true };

	fx_setup(&f);
	assert_int_equal(mkdir(f.dir, 0755), 0);
	assert_int_equal(dirwatch_new(f.l, f.dir, IN_CREATE, on_event, &s, &s.dw), 0);
	touch(f.dir, "1");
	touch(f.dir, "2");
	touch(f.dir, "3");
	assert_int_equal(loop_run_once(f.l, 500 * USEC_PER_MSEC), 0);
	assert_null(s.dw);
	assert_int_equal(s.total, 1);
	fx_teardown(&f);
}

/*
 * The callback frees the watch when the directory goes, with its parent gone too: the
 * DIRWATCH_RETRY that would follow the GONE is not delivered to the freed watch.
 */
static void test_freed_on_gone(void **state)
{
	struct fx f;
	struct seen s = { .free_on = DIRWATCH_GONE, .act = true };
	char deep[128];

	fx_setup(&f);
	(void)snprintf(deep, sizeof(deep), "%s/sub", f.dir);
	assert_int_equal(mkdir(f.dir, 0755), 0);
	assert_int_equal(mkdir(deep, 0755), 0);
	assert_int_equal(dirwatch_new(f.l, deep, IN_CREATE, on_event, &s, &s.dw), 0);
	assert_int_equal(rmdir(deep), 0);
	assert_int_equal(rmdir(f.dir), 0);
	for (int i = 0; i < 20 && s.dw; i++)
		assert_int_equal(loop_run_once(f.l, 200 * USEC_PER_MSEC), 0);
	assert_null(s.dw);
	assert_int_equal(s.n[DIRWATCH_GONE], 1);
	assert_int_equal(s.total, 1);
	fx_teardown(&f);
}

static struct fx *recreate_fx;

static void on_recreate(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata)
{
	struct seen *s = userdata;

	s->n[ev->kind]++;
	s->total++;
	if (ev->kind == DIRWATCH_EVENT)
		(void)snprintf(s->name, sizeof(s->name), "%s", ev->name);
	if (!s->act)
		return;
	/* Re-armed: freed and made again on the same path, from its own callback. */
	s->act = false;
	assert_ptr_equal(dw, s->dw);
	s->dw = dirwatch_free(s->dw);
	s->recreate_r =
		dirwatch_new(recreate_fx->l, recreate_fx->dir, IN_CREATE, on_recreate, s, &s->dw);
	touch(recreate_fx->dir, "after");
}

/*
 * Freed and made again from its own callback: the new watch gets what happens from then on
 * ("after"), the old one nothing more. An event read in the same batch for the old watch
 * ("also-before") was the old watch's: it is dropped with it, as the owner asked.
 */
static void test_recreated_from_callback(void **state)
{
	struct fx f;
	struct seen s = { .act = true };

	fx_setup(&f);
	recreate_fx = &f;
	assert_int_equal(mkdir(f.dir, 0755), 0);
	assert_int_equal(dirwatch_new(f.l, f.dir, IN_CREATE, on_recreate, &s, &s.dw), 0);
	touch(f.dir, "before");
	touch(f.dir, "also-before");
	wait_kind(&f, &s, DIRWATCH_EVENT, 2);
	assert_int_equal(s.recreate_r, 0);
	assert_string_equal(s.name, "after");
	assert_int_equal(loop_run_once(f.l, 50 * USEC_PER_MSEC), 0);
	assert_int_equal(s.total, 2);
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

/* The inotify queue overflowing: the owner is told (IN_Q_OVERFLOW) and looks again itself. */
static void test_queue_overflow(void **state)
{
	struct fx f;
	struct seen s = { 0 };
	char path[160];
	char *text = NULL;
	unsigned max = 0;
	int r;

	r = read_file("/proc/sys/fs/inotify/max_queued_events", 64, &text, NULL);
	if (r >= 0) {
		text[strcspn(text, "\n")] = '\0';
		r = safe_atou(text, &max);
	}
	free(text);
	/* The queue's size: overflowing a larger one would take too long for a unit test. */
	if (r < 0 || max > 65536)
		skip();
	fx_setup(&f);
	assert_int_equal(mkdir(f.dir, 0755), 0);
	assert_int_equal(dirwatch_new(f.l, f.dir, IN_CREATE | IN_DELETE, on_event, &s, &s.dw), 0);
	(void)snprintf(path, sizeof(path), "%s/f", f.dir);
	for (unsigned i = 0; i <= max / 2 + 1; i++) {
		touch(f.dir, "f");
		assert_int_equal(unlink(path), 0);
	}
	for (int i = 0; i < 100 && !(s.mask & IN_Q_OVERFLOW); i++)
		assert_int_equal(loop_run_once(f.l, 200 * USEC_PER_MSEC), 0);
	assert_true(s.mask & IN_Q_OVERFLOW);
	assert_true(dirwatch_present(s.dw));
	dirwatch_free(s.dw);
	fx_teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events_inside),
		cmocka_unit_test(test_gone_and_back),
		cmocka_unit_test(test_symlink_swapped),
		cmocka_unit_test(test_parent_missing_polled),
		cmocka_unit_test(test_file_in_the_way),
		cmocka_unit_test(test_freed_from_callback),
		cmocka_unit_test(test_freed_on_gone),
		cmocka_unit_test(test_recreated_from_callback),
		cmocka_unit_test(test_queue_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
