#include "enforce-mode.h"

/*
 * The conditions are checked in the order a person fixes them: a node whose driver lacks the
 * API is told that first, not that its cgroups are v1.
 */
static const char *driver_missing(const struct enforce_inputs *in)
{
	if (!in->want_driver)
		return "off";
	if (in->integrated)
		return "integrated";
	if (!in->gpus_support_limits)
		return "driver-unsupported";
	if (in->mig)
		return "mig";
	if (!in->cgroup_v2)
		return "cgroup-v1";
	if (!in->cdi_delivery)
		return "not-cdi";
	if (!in->cdi_hook)
		return "no-cdi-hook";
	if (!in->equal_limits)
		return "unequal-limits";
	return "";
}

void enforce_decide(const struct enforce_inputs *in, struct enforce_verdict *ret)
{
	bool driver, interposer;

	ret->driver_reason = driver_missing(in);
	if (!in->want_interposer)
		ret->interposer_reason = "off";
	else if (!in->interposer_installed)
		ret->interposer_reason = "not-installed";
	else
		ret->interposer_reason = "";
	driver = !*ret->driver_reason;
	interposer = !*ret->interposer_reason;
	ret->mode = driver && interposer ? ENFORCE_BOTH :
		    driver		 ? ENFORCE_DRIVER :
		    interposer		 ? ENFORCE_INTERPOSER :
					   ENFORCE_ACCOUNTING;
}

const char *enforce_mode_name(enum enforce_mode m)
{
	static const char *const names[ENFORCE_MODE_COUNT] = {
		[ENFORCE_ACCOUNTING] = "accounting",
		[ENFORCE_DRIVER] = "driver",
		[ENFORCE_INTERPOSER] = "interposer",
		[ENFORCE_BOTH] = "both",
	};

	return (unsigned)m < ENFORCE_MODE_COUNT ? names[m] : "accounting";
}
