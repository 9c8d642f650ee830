/*
 * doctor-backstop.c: plugin.backstop, the gpumem backstop's policy (docs/sharing.md
 * "Backstop") and whether it can act: on, a gpumem resource configured, and the host's PID
 * namespace reached (the daemon's own test, backstop_host_pid(), made from where the doctor
 * runs: inside the daemon's pod, kubectl exec, it is the daemon's answer).
 */
#include "backstop.h"
#include "doctor-int.h"

static const char fix_host_pid[] =
	"deploy with deployments/overlays/backstop (hostPID: true); without it the backstop cannot kill";

void doctor_backstop(struct doctor *dr)
{
	const struct config *c = doctor_opts(dr)->cfg;
	const struct config_backstop *b;
	const char *why = "";
	struct doctor_check *k;
	int r;

	if (!c) {
		(void)doctor_add(dr, "plugin.backstop", DOCTOR_SKIP, "no config");
		return;
	}
	b = &c->gpumem.enforcement.backstop;
	if (!b->enabled) {
		(void)doctor_add(
			dr, "plugin.backstop", DOCTOR_SKIP,
			"gpumem backstop off (the default): no process is killed for its GPU memory");
		return;
	}
	if (!c->gpumem.devices.n_refs) {
		(void)doctor_add(
			dr, "plugin.backstop", DOCTOR_WARN,
			"gpumem backstop on, but no nvidia.com/gpumem devices are configured: it has nothing to act on");
		return;
	}
	r = backstop_host_pid(c->metrics.host_proc, &why);
	k = doctor_add(
		dr, "plugin.backstop", r > 0 ? DOCTOR_PASS : DOCTOR_FAIL,
		r > 0 ? "gpumem backstop on: a process whose container stays above its limit x %u%% for %.0f s is killed (sampled every %.1f s)" :
			"gpumem backstop on but cannot act (limit x %u%% for %.0f s, sampled every %.1f s)",
		b->tolerance_percent, (double)b->after / USEC_PER_SEC,
		(double)b->interval / USEC_PER_SEC);
	doctor_evidence(k, "discrete GPUs only: an integrated (Jetson) GPU is not watched");
	if (r > 0)
		return;
	doctor_evidence(k, "%s (host /proc: %s)", why,
			c->metrics.host_proc ? c->metrics.host_proc : "/proc");
	doctor_fix(k, fix_host_pid);
}
