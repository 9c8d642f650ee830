#include "kubelet.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "backoff.h"
#include "deviceplugin.pb-c.h"
#include "dirwatch.h"
#include "grpc.h"
#include "loop.h"

#define LOG_MODULE "kubelet"
#include "log.h"

#define REGISTER_TIMEOUT (20 * USEC_PER_SEC)
#define BACKOFF_FIRST	 (1 * USEC_PER_MSEC)
#define BACKOFF_MAX	 (5 * USEC_PER_SEC)
#define STREAM_WATCHDOG	 (2 * USEC_PER_SEC)

/* IN_ONLYDIR, IN_DELETE_SELF, IN_MOVE_SELF: dirwatch adds them. */
#define DIR_MASK (IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB)

/*
 * One directory that may disappear and come back (dirwatch.h: watched itself while it exists,
 * through its parent while it does not, polled with backoff while the parent is missing too),
 * and what its events mean to registration.
 */
struct kdir {
	struct kubelet *k;
	struct dirwatch *dw;
	bool plugin; /* the device-plugin directory: FILE_DELETED, DIR_GONE/DIR_BACK */
	bool sock;   /* kubelet.sock lives here: SOCKET_CREATED */
};

struct kubelet {
	struct loop *loop;
	char *plugin_dir;
	char *sock;	 /* kubelet.sock path, NULL when registration is off */
	char *sock_name; /* its base name */
	struct kdir *pd; /* the device-plugin directory */
	struct kdir *sd; /* kubelet.sock's directory when it is another one */
	struct kubelet_reg *regs;
	kubelet_event_fn *fn;
	void *userdata;
};

struct kubelet_reg {
	struct kubelet *k;
	struct kubelet_reg *next; /* k->regs */
	char *resource;
	char *endpoint;
	kubelet_reg_fn *fn;
	kubelet_reg_dial_fn *dial_fn;
	void *userdata;
	enum kubelet_reg_state state;
	struct grpc_client_call *call;
	struct loop_timer *timer; /* BACKING_OFF: the retry; WAITING_STREAM: the stream watchdog */
	struct backoff backoff;
	bool again; /* started again while a call was in flight */
	pid_t peer_pid;
	unsigned streams;  /* the kubelet's open ListAndWatch streams (the owner reports them) */
	unsigned count;	   /* registrations accepted (for metrics) */
	unsigned attempts; /* Register calls started */
	unsigned failures; /* consecutive, for log rate */
};

/* --- directory watches --- */

static void emit(struct kubelet *k, enum kubelet_event ev, const char *name)
{
	k->fn(k, ev, name, k->userdata);
}

static void kdir_retrying(struct kdir *kd, const struct dirwatch_event *ev)
{
	/* Once per backoff step while it grows, then about once a minute. */
	if (ev->failures <= 8 || ev->failures % 6 == 0)
		log_warn_errno(ev->error, "cannot watch directory, retrying",
			       "path=%s what=%s retry_ms=%llu", dirwatch_path(kd->dw), ev->what,
			       (unsigned long long)(ev->retry_usec / USEC_PER_MSEC));
}

static void kdir_gone(struct kdir *kd)
{
	log_warn("directory gone, waiting for it to come back", "path=%s", dirwatch_path(kd->dw));
	if (kd->plugin)
		emit(kd->k, KUBELET_EVENT_DIR_GONE, dirwatch_path(kd->dw));
}

static void kdir_back(struct kdir *kd)
{
	struct kubelet *k = kd->k;
	struct stat st;

	log_info("directory back, watching it again", "path=%s", dirwatch_path(kd->dw));
	if (kd->plugin)
		emit(k, KUBELET_EVENT_DIR_BACK, dirwatch_path(kd->dw));
	/* kubelet.sock may have been created before the watch was armed. */
	if (kd->sock && dirwatch_present(kd->dw) && lstat(k->sock, &st) == 0)
		emit(k, KUBELET_EVENT_SOCKET_CREATED, k->sock_name);
}

static void on_dir(struct dirwatch *dw, const struct dirwatch_event *ev, void *userdata)
{
	struct kdir *kd = userdata;
	struct kubelet *k = kd->k;
	uint32_t mask = ev->mask;
	const char *name = ev->name;

	switch (ev->kind) {
	case DIRWATCH_GONE:
		kdir_gone(kd);
		return;
	case DIRWATCH_REPLACED:
		kdir_gone(kd);
		kdir_back(kd);
		return;
	case DIRWATCH_BACK:
		kdir_back(kd);
		return;
	case DIRWATCH_RETRY:
		kdir_retrying(kd, ev);
		return;
	case DIRWATCH_EVENT:
		break;
	}
	if (mask & IN_Q_OVERFLOW) {
		struct stat st;

		/* Events were lost: a kubelet.sock created meanwhile must not go unseen. */
		log_warn("inotify queue overflowed, events lost", "path=%s", dirwatch_path(dw));
		if (kd->plugin)
			emit(k, KUBELET_EVENT_FILE_CHANGED, "");
		if (kd->sock && lstat(k->sock, &st) == 0)
			emit(k, KUBELET_EVENT_SOCKET_CREATED, k->sock_name);
		return;
	}
	if (kd->sock && (mask & (IN_CREATE | IN_MOVED_TO)) && streq(name, k->sock_name)) {
		emit(k, KUBELET_EVENT_SOCKET_CREATED, name);
		return;
	}
	if (kd->plugin && (mask & (IN_DELETE | IN_MOVED_FROM)))
		emit(k, KUBELET_EVENT_FILE_DELETED, name);
	else if (kd->plugin && (mask & (IN_CREATE | IN_MOVED_TO)))
		emit(k, KUBELET_EVENT_FILE_CREATED, name);
	else if (kd->plugin && (mask & IN_ATTRIB) && *name)
		emit(k, KUBELET_EVENT_FILE_CHANGED, name);
}

static struct kdir *kdir_free(struct kdir *kd)
{
	if (!kd)
		return NULL;
	dirwatch_free(kd->dw);
	free(kd);
	return NULL;
}

static int kdir_new(struct kubelet *k, const char *path, bool plugin, bool sock, struct kdir **ret)
{
	struct kdir *kd = calloc(1, sizeof(*kd));
	struct dirwatch_event ev;
	int r;

	if (!kd)
		return -ENOMEM;
	kd->k = k;
	kd->plugin = plugin;
	kd->sock = sock;
	r = dirwatch_new(k->loop, path, DIR_MASK, on_dir, kd, &kd->dw);
	if (r < 0) {
		free(kd);
		return r;
	}
	if (dirwatch_polled(kd->dw, &ev))
		kdir_retrying(kd, &ev);
	else if (!dirwatch_present(kd->dw))
		log_warn("directory missing, waiting for it", "path=%s", dirwatch_path(kd->dw));
	*ret = kd;
	return 0;
}

/* --- the kubelet object --- */

struct paths {
	char *plugin_dir;
	char *sock;
	char *sock_name;
	char *sock_dir;
};

static void paths_release(struct paths *p)
{
	free(p->plugin_dir);
	free(p->sock);
	free(p->sock_name);
	free(p->sock_dir);
}

static int paths_make(const char *plugin_dir, const char *kubelet_sock, struct paths *ret)
{
	struct sockaddr_un sa;
	struct paths p = { 0 };
	int r = -ENOMEM;

	p.plugin_dir = path_trim(plugin_dir);
	if (!p.plugin_dir)
		goto fail;
	if (kubelet_sock && *kubelet_sock) {
		if (strlen(kubelet_sock) >= sizeof(sa.sun_path)) {
			r = -ENAMETOOLONG;
			goto fail;
		}
		r = path_split(kubelet_sock, &p.sock_dir, &p.sock_name);
		if (r < 0)
			goto fail;
		r = -ENOMEM;
		p.sock = strdup(kubelet_sock);
		if (!p.sock)
			goto fail;
		if (!p.sock_dir && !(p.sock_dir = strdup("/")))
			goto fail;
		if (!p.sock_name && !(p.sock_name = strdup("")))
			goto fail;
	}
	*ret = p;
	return 0;
fail:
	paths_release(&p);
	(void)log_error_errno(r, "invalid kubelet paths", "plugin_dir=%s kubelet_socket=%s",
			      plugin_dir, kubelet_sock ? kubelet_sock : "");
	return r;
}

/* True when kubelet.sock's directory is the device-plugin directory (same path or inode). */
static bool same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	char *ta, *tb;
	bool same;

	ta = path_trim(a);
	tb = path_trim(b);
	same = ta && tb && streq(ta, tb);
	free(ta);
	free(tb);
	if (same)
		return true;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

/* Creates the watches for @p into @ret_pd and @ret_sd; nothing is reported. */
static int watches_make(struct kubelet *k, const struct paths *p, struct kdir **ret_pd,
			struct kdir **ret_sd)
{
	struct kdir *pd = NULL, *sd = NULL;
	bool shared = p->sock && same_dir(p->sock_dir, p->plugin_dir);
	int r;

	r = kdir_new(k, p->plugin_dir, true, shared, &pd);
	if (r < 0)
		return r;
	if (p->sock && !shared) {
		r = kdir_new(k, p->sock_dir, false, true, &sd);
		if (r < 0) {
			kdir_free(pd);
			return r;
		}
	}
	*ret_pd = pd;
	*ret_sd = sd;
	return 0;
}

int kubelet_new(struct loop *l, const char *plugin_dir, const char *kubelet_sock,
		kubelet_event_fn *fn, void *userdata, struct kubelet **ret)
{
	struct kubelet *k;
	struct paths p;
	int r;

	r = paths_make(plugin_dir, kubelet_sock, &p);
	if (r < 0)
		return r;
	k = calloc(1, sizeof(*k));
	if (!k) {
		paths_release(&p);
		return -ENOMEM;
	}
	k->loop = l;
	k->fn = fn;
	k->userdata = userdata;
	/* The watches read k->sock_name and k->sock when they report. */
	k->plugin_dir = p.plugin_dir;
	k->sock = p.sock;
	k->sock_name = p.sock_name;
	r = watches_make(k, &p, &k->pd, &k->sd);
	free(p.sock_dir);
	if (r < 0) {
		kubelet_free(k);
		return r;
	}
	*ret = k;
	return 0;
}

static void reg_reset(struct kubelet_reg *reg);

struct kubelet *kubelet_free(struct kubelet *k)
{
	if (!k)
		return NULL;
	/* Registrations point at @k: stop and detach any the owner forgot; they do nothing now. */
	for (struct kubelet_reg *reg = k->regs; reg; reg = reg->next) {
		reg_reset(reg);
		reg->k = NULL;
	}
	kdir_free(k->pd);
	kdir_free(k->sd);
	free(k->plugin_dir);
	free(k->sock);
	free(k->sock_name);
	free(k);
	return NULL;
}

bool kubelet_enabled(const struct kubelet *k)
{
	return k->sock != NULL;
}

bool kubelet_dir_present(const struct kubelet *k)
{
	return k->pd && dirwatch_present(k->pd->dw);
}

int kubelet_set_paths(struct kubelet *k, const char *plugin_dir, const char *kubelet_sock)
{
	struct kdir *pd, *sd, *old_pd, *old_sd;
	struct paths p;
	char *old[3];
	int r;

	r = paths_make(plugin_dir, kubelet_sock, &p);
	if (r < 0)
		return r;
	if (streq(p.plugin_dir, k->plugin_dir) && streq_ptr(p.sock, k->sock)) {
		paths_release(&p);
		return 0;
	}
	/* Swap first: the new watches read k->sock while they arm. */
	old[0] = k->plugin_dir;
	old[1] = k->sock;
	old[2] = k->sock_name;
	old_pd = k->pd;
	old_sd = k->sd;
	k->plugin_dir = p.plugin_dir;
	k->sock = p.sock;
	k->sock_name = p.sock_name;
	r = watches_make(k, &p, &pd, &sd);
	free(p.sock_dir);
	if (r < 0) {
		k->plugin_dir = old[0];
		k->sock = old[1];
		k->sock_name = old[2];
		free(p.plugin_dir);
		free(p.sock);
		free(p.sock_name);
		return r;
	}
	k->pd = pd;
	k->sd = sd;
	kdir_free(old_pd);
	kdir_free(old_sd);
	for (int i = 0; i < 3; i++)
		free(old[i]);
	for (struct kubelet_reg *reg = k->regs; reg; reg = reg->next)
		reg_reset(reg);
	log_info("kubelet paths changed", "device_plugin_path=%s kubelet_socket=%s", k->plugin_dir,
		 k->sock ? k->sock : "(registration off)");
	return 1;
}

/* --- registration --- */

/*
 * The legal transitions (kubelet.h draws them). Every attempt passes through REGISTERING, and
 * reg_reset() may return any state to IDLE.
 */
static const unsigned reg_next[KUBELET_REG_STATE_COUNT] = {
#define B(s) (1u << KUBELET_REG_##s)
	[KUBELET_REG_IDLE] = B(REGISTERING) | B(STOPPED),
	[KUBELET_REG_REGISTERING] = B(IDLE) | B(WAITING_STREAM) | B(REGISTERED) | B(BACKING_OFF) |
				    B(STOPPED),
	[KUBELET_REG_WAITING_STREAM] = B(IDLE) | B(REGISTERING) | B(REGISTERED) | B(STOPPED),
	[KUBELET_REG_REGISTERED] = B(IDLE) | B(REGISTERING) | B(STOPPED),
	[KUBELET_REG_BACKING_OFF] = B(IDLE) | B(REGISTERING) | B(REGISTERED) | B(STOPPED),
	[KUBELET_REG_STOPPED] = B(IDLE) | B(REGISTERING) | B(REGISTERED),
#undef B
};

/* The one place the state changes. Leaving a state disarms its timer. */
static void set_state(struct kubelet_reg *reg, enum kubelet_reg_state to)
{
	enum kubelet_reg_state from = reg->state;

	if (from == to)
		return;
	assert(reg_next[from] & (1u << to));
	log_debug("registration state changed", "resource=%s from=%s to=%s", reg->resource,
		  kubelet_reg_state_name(from), kubelet_reg_state_name(to));
	loop_timer_disarm(reg->timer);
	reg->state = to;
}

static void reg_attempt(struct kubelet_reg *reg);

/* @now: a start came while the attempt was in flight, so the retry does not wait. */
static void reg_backoff(struct kubelet_reg *reg, bool now)
{
	set_state(reg, KUBELET_REG_BACKING_OFF);
	if (now) {
		backoff_reset(&reg->backoff);
		loop_timer_arm(reg->timer, 0);
		return;
	}
	loop_timer_arm(reg->timer, backoff_next(&reg->backoff));
}

/* BACKING_OFF: the retry is due; WAITING_STREAM: no stream came after the accept. */
static void reg_timer(struct loop_timer *t, void *userdata)
{
	struct kubelet_reg *reg = userdata;

	if (reg->state == KUBELET_REG_WAITING_STREAM) {
		log_warn(
			"registered, but the kubelet opened no ListAndWatch stream, registering again",
			"resource=%s wait_ms=%llu", reg->resource,
			(unsigned long long)(STREAM_WATCHDOG / USEC_PER_MSEC));
		backoff_reset(&reg->backoff);
	}
	reg_attempt(reg);
}

static void reg_failed(struct kubelet_reg *reg, int r, enum grpc_status status, const char *message)
{
	reg->failures++;
	/* Log the first failures, then one in ten, so a long kubelet outage stays readable. */
	if (reg->failures > 3 && reg->failures % 10 != 0)
		return;
	if (r < 0)
		log_warn_errno(r, "register failed, retrying",
			       "resource=%s socket=%s reason=%s attempt=%u", reg->resource,
			       reg->k ? reg->k->sock : "", log_q(message ? message : ""),
			       reg->failures);
	else
		log_warn("register refused by the kubelet, retrying",
			 "resource=%s grpc_status=%s reason=%s attempt=%u", reg->resource,
			 grpc_status_name((int)status), log_q(message ? message : ""),
			 reg->failures);
}

/*
 * The state and its timer are settled before the owner hears of the result, so that whatever
 * the owner does from its callback (stop, start, free) is the last word.
 */
static void reg_done(struct grpc_client_call *cc, int r, enum grpc_status status,
		     const char *message, const uint8_t *resp, size_t len, void *userdata)
{
	struct kubelet_reg *reg = userdata;
	bool again = reg->again, ok = r == 0 && status == GRPC_STATUS_OK;

	reg->call = NULL;
	reg->again = false;
	if (!reg->peer_pid)
		(void)grpc_client_call_peer_cred(cc, &reg->peer_pid, NULL);
	if (ok) {
		reg->count++;
		reg->failures = 0;
		backoff_reset(&reg->backoff);
		log_info("registered with the kubelet",
			 "resource=%s endpoint=%s registrations=%u kubelet_pid=%d", reg->resource,
			 reg->endpoint, reg->count, (int)reg->peer_pid);
		/*
		 * A start requested meanwhile is not repeated: a second Register at the same
		 * socket is refused while the kubelet holds our stream. The watchdog registers
		 * again when no stream follows.
		 */
		if (reg->streams > 0) {
			set_state(reg, KUBELET_REG_REGISTERED);
		} else {
			set_state(reg, KUBELET_REG_WAITING_STREAM);
			loop_timer_arm(reg->timer, STREAM_WATCHDOG);
		}
	} else {
		reg_failed(reg, r, status, message);
		if (reg->streams > 0) {
			/* Refused while the kubelet streams from us: it has us, a retry would fail too. */
			log_info(
				"kubelet still holds our ListAndWatch stream, not registering again",
				"resource=%s", reg->resource);
			set_state(reg, KUBELET_REG_REGISTERED);
		} else {
			reg_backoff(reg, again);
		}
	}
	if (reg->fn)
		reg->fn(reg, ok, reg->userdata);
}

/* Sends a Register now. The dial hook, when it runs, is the last thing done. */
static void reg_attempt(struct kubelet_reg *reg)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	struct grpc_client_opts co = { .timeout = REGISTER_TIMEOUT };
	uint8_t buf[1024];
	size_t n;
	int r;

	set_state(reg, KUBELET_REG_REGISTERING);
	reg->peer_pid = 0;
	if (!reg->k || !reg->k->sock) {
		set_state(reg, KUBELET_REG_IDLE);
		return;
	}
	opts.get_preferred_allocation_available = true;
	req.version = (char *)"v1beta1";
	req.endpoint = reg->endpoint;
	req.resource_name = reg->resource;
	req.options = &opts;
	n = v1beta1__register_request__get_packed_size(&req);
	if (n > sizeof(buf)) {
		log_error("register request too large", "resource=%s", reg->resource);
		set_state(reg, KUBELET_REG_STOPPED);
		return;
	}
	v1beta1__register_request__pack(&req, buf);
	reg->attempts++;
	r = grpc_client_call_start(reg->k->loop, reg->k->sock, "/v1beta1.Registration/Register",
				   buf, n, &co, reg_done, reg, &reg->call);
	if (r < 0) {
		log_warn_errno(r, "register failed, retrying", "resource=%s socket=%s",
			       reg->resource, reg->k->sock);
		reg_backoff(reg, false);
		return;
	}
	if (grpc_client_call_peer_cred(reg->call, &reg->peer_pid, NULL) == 0 && reg->dial_fn)
		reg->dial_fn(reg, reg->peer_pid, reg->userdata);
}

/* Back to IDLE: nothing in flight, nothing armed. The stream count is the plugin's fact. */
static void reg_reset(struct kubelet_reg *reg)
{
	reg->call = grpc_client_call_cancel(reg->call);
	reg->again = false;
	reg->peer_pid = 0;
	backoff_reset(&reg->backoff);
	set_state(reg, KUBELET_REG_IDLE);
}

int kubelet_reg_new(struct kubelet *k, const char *resource, const char *endpoint,
		    kubelet_reg_fn *fn, void *userdata, struct kubelet_reg **ret)
{
	struct kubelet_reg *reg;
	int r;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->fn = fn;
	reg->userdata = userdata;
	reg->backoff = BACKOFF_INIT(BACKOFF_FIRST, 4, BACKOFF_MAX);
	reg->state = KUBELET_REG_IDLE;
	reg->resource = strdup(resource);
	reg->endpoint = strdup(endpoint);
	if (!reg->resource || !reg->endpoint) {
		kubelet_reg_free(reg);
		return -ENOMEM;
	}
	r = loop_timer_new(k->loop, reg_timer, reg, &reg->timer);
	if (r < 0) {
		kubelet_reg_free(reg);
		return r;
	}
	reg->k = k;
	reg->next = k->regs;
	k->regs = reg;
	*ret = reg;
	return 0;
}

void kubelet_reg_set_dial_fn(struct kubelet_reg *reg, kubelet_reg_dial_fn *fn)
{
	reg->dial_fn = fn;
}

void kubelet_reg_start(struct kubelet_reg *reg)
{
	if (reg->state == KUBELET_REG_REGISTERING) {
		reg->again = true;
		return;
	}
	/* A live kubelet stream means it still has us: a second Register would be refused. */
	if (reg->streams > 0) {
		log_debug("kubelet holds our stream, not registering", "resource=%s state=%s",
			  reg->resource, kubelet_reg_state_name(reg->state));
		/* Started again after a stop (a plugin that stood down): registered as it is. */
		if (reg->state == KUBELET_REG_STOPPED)
			set_state(reg, KUBELET_REG_REGISTERED);
		return;
	}
	backoff_reset(&reg->backoff);
	reg_attempt(reg);
}

void kubelet_reg_stop(struct kubelet_reg *reg)
{
	reg->call = grpc_client_call_cancel(reg->call);
	reg->again = false;
	set_state(reg, KUBELET_REG_STOPPED);
}

void kubelet_reg_stream_opened(struct kubelet_reg *reg)
{
	reg->streams++;
	if (reg->state == KUBELET_REG_WAITING_STREAM || reg->state == KUBELET_REG_BACKING_OFF)
		set_state(reg, KUBELET_REG_REGISTERED);
}

void kubelet_reg_stream_closed(struct kubelet_reg *reg)
{
	if (reg->streams > 0)
		reg->streams--;
	/* Only the end of the kubelet's last stream re-registers: it went away or dropped us. */
	if (reg->streams == 0 && reg->state != KUBELET_REG_STOPPED)
		kubelet_reg_start(reg);
}

enum kubelet_reg_state kubelet_reg_state(const struct kubelet_reg *reg)
{
	return reg->state;
}

const char *kubelet_reg_state_name(enum kubelet_reg_state s)
{
	static const char *const names[KUBELET_REG_STATE_COUNT] = {
		[KUBELET_REG_IDLE] = "idle",
		[KUBELET_REG_REGISTERING] = "registering",
		[KUBELET_REG_WAITING_STREAM] = "waiting-stream",
		[KUBELET_REG_REGISTERED] = "registered",
		[KUBELET_REG_BACKING_OFF] = "backing-off",
		[KUBELET_REG_STOPPED] = "stopped",
	};

	return (unsigned)s < KUBELET_REG_STATE_COUNT ? names[s] : "invalid";
}

bool kubelet_reg_registered(const struct kubelet_reg *reg)
{
	return reg->state == KUBELET_REG_REGISTERED || reg->state == KUBELET_REG_WAITING_STREAM;
}

unsigned kubelet_reg_count(const struct kubelet_reg *reg)
{
	return reg->count;
}

unsigned kubelet_reg_attempts(const struct kubelet_reg *reg)
{
	return reg->attempts;
}

pid_t kubelet_reg_peer_pid(const struct kubelet_reg *reg)
{
	return reg->peer_pid;
}

struct kubelet_reg *kubelet_reg_free(struct kubelet_reg *reg)
{
	if (!reg)
		return NULL;
	if (reg->k)
		for (struct kubelet_reg **pp = &reg->k->regs; *pp; pp = &(*pp)->next)
			if (*pp == reg) {
				*pp = reg->next;
				break;
			}
	grpc_client_call_cancel(reg->call);
	loop_timer_free(reg->timer);
	free(reg->resource);
	free(reg->endpoint);
	free(reg);
	return NULL;
}
