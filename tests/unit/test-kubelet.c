/*
 * kubelet.c: the device-plugin directory deleted, renamed, missing at start (parent too) and
 * coming back; kubelet_set_paths(); the registration state machine and its re-entrancy
 * (stop, start, free from the callback); the kubelet's streams reported to it (waiting for
 * the stream, re-registering when the last one ends, a kubelet restart); the kubelet's pid by
 * SO_PEERCRED. Against an
 * in-process gRPC server on a temporary kubelet.sock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grpc.h"
#include "kubelet.h"
#include "loop.h"
#include "unit-fs.h"
#include "unit.h"

/* --- helpers --- */

static void touch(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	close(fd);
}

struct ev {
	enum kubelet_event ev;
	char name[256];
};

struct rec {
	struct ev evs[64];
	unsigned n;
};

static void on_event(struct kubelet *k, enum kubelet_event ev, const char *name, void *userdata)
{
	struct rec *r = userdata;

	if (r->n < ELEMENTSOF(r->evs)) {
		r->evs[r->n].ev = ev;
		(void)snprintf(r->evs[r->n].name, sizeof(r->evs[r->n].name), "%s", name);
		r->n++;
	}
}

/* Index of the first @ev (named @name, unless NULL) at or after @from, or -1. */
static int find_ev(const struct rec *r, unsigned from, enum kubelet_event ev, const char *name)
{
	for (unsigned i = from; i < r->n; i++)
		if (r->evs[i].ev == ev && (!name || streq(r->evs[i].name, name)))
			return (int)i;
	return -1;
}

/* Runs @l until @ev (named @name) is recorded after @from, for at most @max. */
static int wait_ev(struct loop *l, struct rec *r, unsigned from, enum kubelet_event ev,
		   const char *name, usec_t max)
{
	usec_t end = now_usec() + max;
	int i;

	while ((i = find_ev(r, from, ev, name)) < 0 && now_usec() < end)
		assert_int_equal(loop_run_once(l, 20 * USEC_PER_MSEC), 0);
	return i;
}

static void run_for(struct loop *l, usec_t t)
{
	usec_t end = now_usec() + t;

	while (now_usec() < end)
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
}

struct fixture {
	char root[64];
	char dp[128];	/* ROOT/device-plugins */
	char sock[160]; /* ROOT/device-plugins/kubelet.sock */
	struct loop *loop;
	struct rec rec;
};

static void fixture_init(struct fixture *f, bool make_dp)
{
	memset(f, 0, sizeof(*f));
	unit_tmpdir("test-kubelet", f->root, sizeof(f->root));
	(void)snprintf(f->dp, sizeof(f->dp), "%s/device-plugins", f->root);
	(void)snprintf(f->sock, sizeof(f->sock), "%s/kubelet.sock", f->dp);
	if (make_dp)
		assert_int_equal(mkdir(f->dp, 0700), 0);
	assert_int_equal(loop_new(&f->loop), 0);
}

static void fixture_release(struct fixture *f)
{
	loop_free(f->loop);
	unit_rm_tree(f->root);
}

static char *join(const char *a, const char *b)
{
	char *s = path_join(a, b);

	assert_non_null(s);
	return s;
}

/* --- the directory --- */

/*
 * A touch of a file in the device-plugin directory is reported (FILE_CHANGED): that is how
 * an instance learns that another registered (plugin.h, upgrades). The directory's own
 * attribute changes are not.
 */
static void test_file_changed(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	char *file;
	int i;

	fixture_init(&f, true);
	file = join(f.dp, "gpu-1.sock");
	touch(file);
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_int_equal(utimensat(AT_FDCWD, file, NULL, 0), 0);
	i = wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_FILE_CHANGED, "gpu-1.sock", USEC_PER_SEC);
	assert_true(i >= 0);
	assert_int_equal(chmod(f.dp, 0750), 0);
	assert_int_equal(chmod(file, 0644), 0);
	i = wait_ev(f.loop, &f.rec, (unsigned)i + 1, KUBELET_EVENT_FILE_CHANGED, "gpu-1.sock",
		    USEC_PER_SEC);
	assert_true(i >= 0);
	assert_int_equal(find_ev(&f.rec, 0, KUBELET_EVENT_FILE_CHANGED, ""), -1);
	kubelet_free(k);
	free(file);
	fixture_release(&f);
}

/*
 * Today's bug: after rm -rf and mkdir of the device-plugin directory, the watch on the removed
 * directory is never re-armed, so a new kubelet.sock (a kubelet restart) goes unseen.
 */
static void test_dir_deleted_and_recreated(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	char *x;
	int i;

	fixture_init(&f, true);
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_true(kubelet_dir_present(k));
	touch(f.sock);
	assert_true(wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_SOCKET_CREATED, "kubelet.sock",
			    USEC_PER_SEC) >= 0);

	unit_rm_tree(f.dp);
	i = wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_DIR_GONE, f.dp, USEC_PER_SEC);
	assert_true(i >= 0);
	/* The files rm -rf removed first were reported. */
	assert_true(find_ev(&f.rec, 0, KUBELET_EVENT_FILE_DELETED, "kubelet.sock") >= 0);
	assert_false(kubelet_dir_present(k));

	assert_int_equal(mkdir(f.dp, 0700), 0);
	i = wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_DIR_BACK, f.dp, USEC_PER_SEC);
	assert_true(i >= 0);
	assert_true(kubelet_dir_present(k));
	/* The empty new directory has no kubelet.sock yet: no SOCKET_CREATED with DIR_BACK. */
	assert_int_equal(find_ev(&f.rec, (unsigned)i, KUBELET_EVENT_SOCKET_CREATED, NULL), -1);

	/* The new directory is watched: a new kubelet.sock and our sockets' deletion are seen. */
	touch(f.sock);
	assert_true(wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_SOCKET_CREATED,
			    "kubelet.sock", USEC_PER_SEC) >= 0);
	x = join(f.dp, "nvidia-gpu.sock");
	touch(x);
	assert_int_equal(unlink(x), 0);
	assert_true(wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_FILE_DELETED,
			    "nvidia-gpu.sock", USEC_PER_SEC) >= 0);
	free(x);

	/* Again, faster than the loop looks: deleted and recreated with kubelet.sock inside. */
	i = (int)f.rec.n;
	unit_rm_tree(f.dp);
	assert_int_equal(mkdir(f.dp, 0700), 0);
	touch(f.sock);
	assert_true(wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_DIR_GONE, f.dp,
			    USEC_PER_SEC) >= 0);
	i = wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_DIR_BACK, f.dp, USEC_PER_SEC);
	assert_true(i >= 0);
	assert_true(wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_SOCKET_CREATED,
			    "kubelet.sock", USEC_PER_SEC) >= 0);
	kubelet_free(k);
	fixture_release(&f);
}

static void test_dir_renamed_away_and_back(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	char *old;
	int i;

	fixture_init(&f, true);
	old = join(f.root, "old");
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_int_equal(rename(f.dp, old), 0);
	i = wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_DIR_GONE, f.dp, USEC_PER_SEC);
	assert_true(i >= 0);
	/* Events in the renamed directory are not ours any more. */
	{
		char *x = join(old, "kubelet.sock");

		touch(x);
		free(x);
	}
	run_for(f.loop, 50 * USEC_PER_MSEC);
	assert_int_equal(find_ev(&f.rec, 0, KUBELET_EVENT_SOCKET_CREATED, NULL), -1);
	/* Renamed back, with a kubelet.sock inside: DIR_BACK, then SOCKET_CREATED. */
	assert_int_equal(rename(old, f.dp), 0);
	i = wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_DIR_BACK, f.dp, USEC_PER_SEC);
	assert_true(i >= 0);
	assert_int_equal(find_ev(&f.rec, (unsigned)i, KUBELET_EVENT_SOCKET_CREATED, "kubelet.sock"),
			 i + 1);
	free(old);
	kubelet_free(k);
	fixture_release(&f);
}

static void test_dir_missing_at_start(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	int i;

	fixture_init(&f, false);
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_false(kubelet_dir_present(k));
	run_for(f.loop, 30 * USEC_PER_MSEC);
	assert_int_equal(f.rec.n, 0);
	/* Created with kubelet.sock before the loop looks: DIR_BACK then SOCKET_CREATED. */
	assert_int_equal(mkdir(f.dp, 0700), 0);
	touch(f.sock);
	i = wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_DIR_BACK, f.dp, USEC_PER_SEC);
	assert_int_equal(i, 0);
	assert_true(kubelet_dir_present(k));
	assert_true(wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_SOCKET_CREATED, "kubelet.sock",
			    USEC_PER_SEC) > 0);
	kubelet_free(k);
	fixture_release(&f);
}

static void test_parent_missing_too(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	char *parent, *dp;
	usec_t t0;

	fixture_init(&f, false);
	parent = join(f.root, "var");
	dp = join(parent, "device-plugins");
	/* Neither exists: polled with backoff (100 ms doubling) until the parent appears. */
	assert_int_equal(kubelet_new(f.loop, dp, f.sock, on_event, &f.rec, &k), 0);
	run_for(f.loop, 250 * USEC_PER_MSEC);
	assert_int_equal(f.rec.n, 0);
	t0 = now_usec();
	assert_int_equal(mkdir(parent, 0700), 0);
	assert_int_equal(mkdir(dp, 0700), 0);
	assert_true(wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_DIR_BACK, dp, 2 * USEC_PER_SEC) >= 0);
	/* The next step of the backoff is 400 ms away at most (slack for a loaded machine). */
	assert_true(now_usec() - t0 < 2500 * USEC_PER_MSEC);
	/* The parent removed with it: watched again once both are back. */
	unit_rm_tree(parent);
	assert_true(wait_ev(f.loop, &f.rec, 1, KUBELET_EVENT_DIR_GONE, dp, USEC_PER_SEC) >= 0);
	run_for(f.loop, 150 * USEC_PER_MSEC);
	assert_int_equal(mkdir(parent, 0700), 0);
	run_for(f.loop, 150 * USEC_PER_MSEC);
	assert_int_equal(mkdir(dp, 0700), 0);
	assert_true(wait_ev(f.loop, &f.rec, 2, KUBELET_EVENT_DIR_BACK, dp, 2 * USEC_PER_SEC) >= 0);
	free(dp);
	free(parent);
	kubelet_free(k);
	fixture_release(&f);
}

static void test_separate_socket_dir(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	char *sd, *sock;
	int i;

	fixture_init(&f, true);
	sd = join(f.root, "kubelet");
	sock = join(sd, "kubelet.sock");
	assert_int_equal(mkdir(sd, 0700), 0);
	assert_int_equal(kubelet_new(f.loop, f.dp, sock, on_event, &f.rec, &k), 0);
	/* A kubelet.sock in the plugin directory is not the kubelet's. */
	touch(f.sock);
	touch(sock);
	i = wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_SOCKET_CREATED, "kubelet.sock", USEC_PER_SEC);
	assert_true(i >= 0);
	run_for(f.loop, 30 * USEC_PER_MSEC);
	assert_int_equal(find_ev(&f.rec, (unsigned)i + 1, KUBELET_EVENT_SOCKET_CREATED, NULL), -1);
	/* Its directory deleted and recreated with the socket: no DIR_* (not the plugin dir). */
	i = (int)f.rec.n;
	unit_rm_tree(sd);
	assert_int_equal(mkdir(sd, 0700), 0);
	touch(sock);
	assert_true(wait_ev(f.loop, &f.rec, (unsigned)i, KUBELET_EVENT_SOCKET_CREATED,
			    "kubelet.sock", USEC_PER_SEC) >= 0);
	assert_int_equal(find_ev(&f.rec, (unsigned)i, KUBELET_EVENT_DIR_GONE, NULL), -1);
	assert_int_equal(find_ev(&f.rec, (unsigned)i, KUBELET_EVENT_DIR_BACK, NULL), -1);
	free(sock);
	free(sd);
	kubelet_free(k);
	fixture_release(&f);
}

static void test_too_long_socket_path(void **state)
{
	struct fixture f;
	struct kubelet *k = NULL;
	char longp[200];

	fixture_init(&f, true);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	assert_int_equal(kubelet_new(f.loop, f.dp, longp, on_event, &f.rec, &k), -ENAMETOOLONG);
	assert_int_equal(kubelet_new(f.loop, f.dp, "", on_event, &f.rec, &k), 0);
	assert_false(kubelet_enabled(k));
	kubelet_free(k);
	fixture_release(&f);
}

/* --- registration against an in-process kubelet --- */

struct fake_kubelet {
	unsigned calls;
	enum grpc_status answer;
};

static void on_register(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct fake_kubelet *fk = userdata;

	fk->calls++;
	if (fk->answer == GRPC_STATUS_OK) {
		assert_int_equal(grpc_call_send(call, NULL, 0), 0);
		assert_int_equal(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
	} else {
		assert_int_equal(grpc_call_finish(call, fk->answer, "refused"), 0);
	}
}

static const struct grpc_method kubelet_methods[] = {
	{ "/v1beta1.Registration/Register", false, on_register },
};

static struct grpc_server *fake_kubelet_start(struct fixture *f, struct fake_kubelet *fk,
					      const char *path)
{
	struct grpc_server *s = NULL;

	assert_int_equal(grpc_server_new(f->loop, kubelet_methods, ELEMENTSOF(kubelet_methods),
					 NULL, fk, &s),
			 0);
	assert_int_equal(grpc_server_listen(s, path), 0);
	return s;
}

enum reg_action {
	ACT_NONE,
	ACT_STOP,
	ACT_START_ONCE,
	ACT_FREE
};

struct reg_rec {
	unsigned ok, failed, dials;
	pid_t dial_pid, done_pid;
	enum reg_action action;
	enum kubelet_reg_state state_in_cb;
	struct kubelet_reg **regp;
};

static void on_reg(struct kubelet_reg *reg, bool ok, void *userdata)
{
	struct reg_rec *rr = userdata;

	rr->state_in_cb = kubelet_reg_state(reg);
	rr->done_pid = kubelet_reg_peer_pid(reg);
	if (ok) {
		rr->ok++;
		return;
	}
	rr->failed++;
	switch (rr->action) {
	case ACT_STOP:
		kubelet_reg_stop(reg);
		break;
	case ACT_START_ONCE:
		rr->action = ACT_NONE;
		kubelet_reg_start(reg);
		break;
	case ACT_FREE:
		*rr->regp = kubelet_reg_free(reg);
		break;
	case ACT_NONE:
		break;
	}
}

static void on_dial(struct kubelet_reg *reg, pid_t pid, void *userdata)
{
	struct reg_rec *rr = userdata;

	rr->dials++;
	rr->dial_pid = pid;
}

static void run_until(struct loop *l, const unsigned *counter, unsigned want, usec_t max)
{
	usec_t end = now_usec() + max;

	while (*counter < want && now_usec() < end)
		assert_int_equal(loop_run_once(l, 10 * USEC_PER_MSEC), 0);
}

/*
 * Today's bug: kubelet_reg_stop() from the callback was undone right after it (the retry was
 * armed once the callback returned), so a refused Register was retried forever.
 */
/* One registration against a fake kubelet that answers @answer: the setup most tests share. */
struct reg_test {
	struct fixture f;
	struct fake_kubelet fk;
	struct reg_rec rr;
	struct grpc_server *s;
	struct kubelet *k;
	struct kubelet_reg *reg;
};

static void reg_test_up(struct reg_test *t, enum grpc_status answer, enum reg_action action)
{
	memset(t, 0, sizeof(*t));
	t->fk.answer = answer;
	t->rr.action = action;
	fixture_init(&t->f, true);
	t->s = fake_kubelet_start(&t->f, &t->fk, t->f.sock);
	assert_int_equal(kubelet_new(t->f.loop, t->f.dp, t->f.sock, on_event, &t->f.rec, &t->k), 0);
	assert_int_equal(
		kubelet_reg_new(t->k, "example.com/gpu", "gpu.sock", on_reg, &t->rr, &t->reg), 0);
}

static void reg_test_down(struct reg_test *t)
{
	kubelet_reg_free(t->reg);
	kubelet_free(t->k);
	grpc_server_free(t->s);
	fixture_release(&t->f);
}

static void test_stop_from_callback(void **state)
{
	struct reg_test t;

	reg_test_up(&t, GRPC_STATUS_INVALID_ARGUMENT, ACT_STOP);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_IDLE);
	kubelet_reg_start(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERING);
	run_until(t.f.loop, &t.rr.failed, 1, USEC_PER_SEC);
	assert_int_equal(t.rr.failed, 1);
	/* The callback sees the retry armed; the stop it made holds. */
	assert_int_equal(t.rr.state_in_cb, KUBELET_REG_BACKING_OFF);
	run_for(t.f.loop, 300 * USEC_PER_MSEC); /* backoff 1, 4, 16, 64, 256 ms */
	assert_int_equal(t.fk.calls, 1);
	assert_int_equal(t.rr.failed, 1);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_STOPPED);
	assert_false(kubelet_reg_registered(t.reg));

	/* A start after the stop registers again; accepted, it stays registered. */
	t.fk.answer = GRPC_STATUS_OK;
	kubelet_reg_start(t.reg);
	run_until(t.f.loop, &t.rr.ok, 1, USEC_PER_SEC);
	assert_int_equal(t.rr.ok, 1);
	assert_int_equal(t.fk.calls, 2);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_WAITING_STREAM);
	assert_true(kubelet_reg_registered(t.reg));
	assert_int_equal(kubelet_reg_count(t.reg), 1);
	kubelet_reg_stop(t.reg); /* the stream watchdog goes too */
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_STOPPED);
	kubelet_reg_stream_opened(t.reg); /* stopped: a stream changes nothing */
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_STOPPED);
	reg_test_down(&t);
}

static void test_start_and_free_from_callback(void **state)
{
	struct reg_test t;

	reg_test_up(&t, GRPC_STATUS_UNAVAILABLE, ACT_START_ONCE);
	/* Started from the callback: the second attempt is in flight when it returns. */
	kubelet_reg_start(t.reg);
	run_until(t.f.loop, &t.rr.failed, 2, USEC_PER_SEC);
	assert_int_equal(t.rr.failed, 2);
	assert_int_equal(t.fk.calls, 2);
	/* Then freed from the callback: nothing touches it afterwards, nothing is sent. */
	t.rr.action = ACT_FREE;
	t.rr.regp = &t.reg;
	run_until(t.f.loop, &t.rr.failed, 3, USEC_PER_SEC);
	assert_int_equal(t.rr.failed, 3);
	assert_null(t.reg);
	run_for(t.f.loop, 100 * USEC_PER_MSEC);
	assert_int_equal(t.fk.calls, 3);
	reg_test_down(&t);
}

static void test_backoff_and_again(void **state)
{
	struct fixture f;
	struct fake_kubelet fk = { .answer = GRPC_STATUS_OK };
	struct reg_rec rr = { .action = ACT_NONE };
	struct grpc_server *s;
	struct kubelet *k = NULL;
	struct kubelet_reg *reg = NULL;

	fixture_init(&f, true);
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_true(kubelet_enabled(k));
	assert_int_equal(kubelet_reg_new(k, "example.com/gpu", "gpu.sock", on_reg, &rr, &reg), 0);
	/* No kubelet yet: retried with backoff. */
	kubelet_reg_start(reg);
	run_until(f.loop, &rr.failed, 2, USEC_PER_SEC);
	assert_true(rr.failed >= 2);
	assert_int_equal(rr.state_in_cb, KUBELET_REG_BACKING_OFF);
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_BACKING_OFF);
	assert_int_equal(kubelet_reg_peer_pid(reg), 0);
	/* The kubelet comes: the next retry gets through. */
	s = fake_kubelet_start(&f, &fk, f.sock);
	run_until(f.loop, &rr.ok, 1, 2 * USEC_PER_SEC);
	assert_int_equal(rr.ok, 1);
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_WAITING_STREAM);
	/* start twice while in flight: one more Register, not two. */
	kubelet_reg_start(reg);
	kubelet_reg_start(reg);
	run_until(f.loop, &rr.ok, 2, USEC_PER_SEC);
	run_for(f.loop, 50 * USEC_PER_MSEC);
	assert_int_equal(rr.ok, 2);
	assert_int_equal(fk.calls, 2);
	/* Every Register started counts, the refused ones too (upgrades' clock, plugin.h). */
	assert_int_equal(kubelet_reg_attempts(reg), (unsigned)(rr.failed + rr.ok));
	assert_string_equal(kubelet_reg_state_name(KUBELET_REG_BACKING_OFF), "backing-off");
	assert_string_equal(kubelet_reg_state_name(KUBELET_REG_STATE_COUNT), "invalid");
	kubelet_reg_free(reg);
	kubelet_free(k);
	grpc_server_free(s);
	fixture_release(&f);
}

/* Item 2: the kubelet's pid, known before our server can see its dial-back. */
static void test_peer_pid(void **state)
{
	struct reg_test t;

	reg_test_up(&t, GRPC_STATUS_OK, ACT_NONE);
	kubelet_reg_set_dial_fn(t.reg, on_dial);
	kubelet_reg_start(t.reg);
	/* The hook ran inside start, before the loop ran once. */
	assert_int_equal(t.rr.dials, 1);
	assert_int_equal(t.rr.dial_pid, getpid());
	assert_int_equal(kubelet_reg_peer_pid(t.reg), getpid());
	run_until(t.f.loop, &t.rr.ok, 1, USEC_PER_SEC);
	assert_int_equal(t.rr.done_pid, getpid());
	reg_test_down(&t);
}

static void test_set_paths(void **state)
{
	struct fixture f;
	struct fake_kubelet fk = { .answer = GRPC_STATUS_OK };
	struct reg_rec rr = { .action = ACT_NONE };
	struct grpc_server *s;
	struct kubelet *k = NULL;
	struct kubelet_reg *reg = NULL;
	char *dp2, *sock2, *old_file;

	fixture_init(&f, true);
	dp2 = join(f.root, "dp2");
	sock2 = join(dp2, "kubelet.sock");
	old_file = join(f.dp, "x.sock");
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_int_equal(kubelet_reg_new(k, "example.com/gpu", "gpu.sock", on_reg, &rr, &reg), 0);
	kubelet_reg_start(reg); /* no kubelet at the old path: backing off */
	run_until(f.loop, &rr.failed, 1, USEC_PER_SEC);
	assert_int_equal(kubelet_set_paths(k, f.dp, f.sock), 0);
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_BACKING_OFF);

	/* Moved to a directory that does not exist yet: regs reset, old dir not watched. */
	assert_int_equal(kubelet_set_paths(k, dp2, sock2), 1);
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_IDLE);
	assert_false(kubelet_dir_present(k));
	touch(old_file);
	assert_int_equal(unlink(old_file), 0);
	assert_int_equal(mkdir(dp2, 0700), 0);
	assert_true(wait_ev(f.loop, &f.rec, 0, KUBELET_EVENT_DIR_BACK, dp2, USEC_PER_SEC) >= 0);
	assert_int_equal(find_ev(&f.rec, 0, KUBELET_EVENT_FILE_DELETED, "x.sock"), -1);
	/* Registration goes to the new kubelet. */
	s = fake_kubelet_start(&f, &fk, sock2);
	kubelet_reg_start(reg);
	run_until(f.loop, &rr.ok, 1, USEC_PER_SEC);
	assert_int_equal(rr.ok, 1);
	assert_int_equal(fk.calls, 1);
	/* Registration off: a start sends nothing. */
	assert_int_equal(kubelet_set_paths(k, dp2, ""), 1);
	assert_false(kubelet_enabled(k));
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_IDLE);
	kubelet_reg_start(reg);
	run_for(f.loop, 30 * USEC_PER_MSEC);
	assert_int_equal(fk.calls, 1);
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_IDLE);
	kubelet_reg_free(reg);
	kubelet_free(k);
	grpc_server_free(s);
	free(old_file);
	free(sock2);
	free(dp2);
	fixture_release(&f);
}

/* A registration left alive by its owner is stopped with its kubelet, not left dangling. */
static void test_free_kubelet_first(void **state)
{
	struct fixture f;
	struct fake_kubelet fk = { .answer = GRPC_STATUS_OK };
	struct reg_rec rr = { .action = ACT_NONE };
	struct grpc_server *s;
	struct kubelet *k = NULL;
	struct kubelet_reg *reg = NULL;

	fixture_init(&f, true);
	s = fake_kubelet_start(&f, &fk, f.sock);
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event, &f.rec, &k), 0);
	assert_int_equal(kubelet_reg_new(k, "example.com/gpu", "gpu.sock", on_reg, &rr, &reg), 0);
	kubelet_reg_start(reg);
	kubelet_free(k); /* the call in flight is cancelled */
	assert_int_equal(kubelet_reg_state(reg), KUBELET_REG_IDLE);
	kubelet_reg_start(reg); /* sends nothing */
	run_for(f.loop, 50 * USEC_PER_MSEC);
	assert_int_equal(rr.ok + rr.failed, 0);
	kubelet_reg_free(reg);
	grpc_server_free(s);
	fixture_release(&f);
}

/*
 * The registration's own transitions, with the kubelet's streams reported as the daemon does:
 * accepted -> waiting for the stream -> stream up -> registered; the last kubelet stream
 * closed -> registered again; a stream closed while another of the kubelet's is open, and a
 * start while the kubelet holds a stream -> nothing sent.
 */
static void test_stream_transitions(void **state)
{
	struct reg_test t;

	reg_test_up(&t, GRPC_STATUS_OK, ACT_NONE);
	kubelet_reg_start(t.reg);
	run_until(t.f.loop, &t.rr.ok, 1, USEC_PER_SEC);
	assert_int_equal(t.rr.ok, 1);
	assert_int_equal(t.rr.state_in_cb, KUBELET_REG_WAITING_STREAM);
	kubelet_reg_stream_opened(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERED);
	kubelet_reg_stream_opened(t.reg);

	/* The kubelet holds a stream: a start sends nothing. */
	kubelet_reg_start(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERED);
	/* One of two closed: the kubelet still has us. */
	kubelet_reg_stream_closed(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERED);
	assert_int_equal(t.fk.calls, 1);
	/* The last one closed: registered again at once. */
	kubelet_reg_stream_closed(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERING);
	/* The stream comes back before the answer: registered, not waiting. */
	kubelet_reg_stream_opened(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERING);
	run_until(t.f.loop, &t.rr.ok, 2, USEC_PER_SEC);
	assert_int_equal(t.rr.ok, 2);
	assert_int_equal(t.fk.calls, 2);
	assert_int_equal(t.rr.state_in_cb, KUBELET_REG_REGISTERED);

	/* Refused while the kubelet streams from us: it has us, no retry. */
	kubelet_reg_stream_closed(t.reg);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERING);
	kubelet_reg_stream_opened(t.reg);
	t.fk.answer = GRPC_STATUS_FAILED_PRECONDITION;
	run_until(t.f.loop, &t.rr.failed, 1, USEC_PER_SEC);
	assert_int_equal(t.rr.failed, 1);
	assert_int_equal(t.rr.state_in_cb, KUBELET_REG_REGISTERED);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_REGISTERED);
	assert_int_equal(t.fk.calls, 3);
	assert_int_equal(kubelet_reg_count(t.reg), 2);
	reg_test_down(&t);
}

/* Registered, but the kubelet never opens ListAndWatch: the watchdog registers again. */
static void test_no_stream_registers_again(void **state)
{
	struct reg_test t;

	reg_test_up(&t, GRPC_STATUS_OK, ACT_NONE);
	kubelet_reg_start(t.reg);
	run_until(t.f.loop, &t.rr.ok, 2, 5 * USEC_PER_SEC);
	assert_int_equal(t.rr.ok, 2);
	assert_int_equal(t.fk.calls, 2);
	assert_int_equal(kubelet_reg_state(t.reg), KUBELET_REG_WAITING_STREAM);
	reg_test_down(&t);
}

/* What the daemon wires: a new kubelet.sock starts the registration again. */
struct restart_rec {
	struct rec rec;
	struct kubelet_reg *reg;
};

static void on_event_start(struct kubelet *k, enum kubelet_event ev, const char *name,
			   void *userdata)
{
	struct restart_rec *r = userdata;

	on_event(k, ev, name, &r->rec);
	if (ev == KUBELET_EVENT_SOCKET_CREATED && r->reg)
		kubelet_reg_start(r->reg);
}

static void test_kubelet_restart_registers_again(void **state)
{
	struct fixture f;
	struct fake_kubelet fk = { .answer = GRPC_STATUS_OK };
	struct reg_rec rr = { .action = ACT_NONE };
	struct restart_rec rs = { 0 };
	struct grpc_server *s;
	struct kubelet *k = NULL;

	fixture_init(&f, true);
	s = fake_kubelet_start(&f, &fk, f.sock);
	assert_int_equal(kubelet_new(f.loop, f.dp, f.sock, on_event_start, &rs, &k), 0);
	assert_int_equal(kubelet_reg_new(k, "example.com/gpu", "gpu.sock", on_reg, &rr, &rs.reg),
			 0);
	kubelet_reg_start(rs.reg);
	run_until(f.loop, &rr.ok, 1, USEC_PER_SEC);
	kubelet_reg_stream_opened(rs.reg);
	assert_int_equal(kubelet_reg_state(rs.reg), KUBELET_REG_REGISTERED);

	/* The kubelet restarts while its old stream is still open: nothing until it ends. */
	grpc_server_free(s); /* removes kubelet.sock */
	(void)unlink(f.sock);
	s = fake_kubelet_start(&f, &fk, f.sock);
	assert_true(wait_ev(f.loop, &rs.rec, 0, KUBELET_EVENT_SOCKET_CREATED, "kubelet.sock",
			    USEC_PER_SEC) >= 0);
	assert_int_equal(kubelet_reg_state(rs.reg), KUBELET_REG_REGISTERED);
	assert_int_equal(fk.calls, 1);
	kubelet_reg_stream_closed(rs.reg);
	run_until(f.loop, &rr.ok, 2, USEC_PER_SEC);
	assert_int_equal(fk.calls, 2);
	assert_int_equal(kubelet_reg_state(rs.reg), KUBELET_REG_WAITING_STREAM);

	/* Restarted again with no stream of ours open: registered at once. */
	grpc_server_free(s); /* removes kubelet.sock */
	(void)unlink(f.sock);
	rs.rec.n = 0;
	s = fake_kubelet_start(&f, &fk, f.sock);
	assert_true(wait_ev(f.loop, &rs.rec, 0, KUBELET_EVENT_SOCKET_CREATED, "kubelet.sock",
			    USEC_PER_SEC) >= 0);
	run_until(f.loop, &rr.ok, 3, USEC_PER_SEC);
	assert_int_equal(rr.ok, 3);
	assert_int_equal(fk.calls, 3);
	kubelet_reg_free(rs.reg);
	kubelet_free(k);
	grpc_server_free(s);
	fixture_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_changed),
		cmocka_unit_test(test_dir_deleted_and_recreated),
		cmocka_unit_test(test_dir_renamed_away_and_back),
		cmocka_unit_test(test_dir_missing_at_start),
		cmocka_unit_test(test_parent_missing_too),
		cmocka_unit_test(test_separate_socket_dir),
		cmocka_unit_test(test_too_long_socket_path),
		cmocka_unit_test(test_stop_from_callback),
		cmocka_unit_test(test_start_and_free_from_callback),
		cmocka_unit_test(test_backoff_and_again),
		cmocka_unit_test(test_peer_pid),
		cmocka_unit_test(test_set_paths),
		cmocka_unit_test(test_free_kubelet_first),
		cmocka_unit_test(test_stream_transitions),
		cmocka_unit_test(test_no_stream_registers_again),
		cmocka_unit_test(test_kubelet_restart_registers_again),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
