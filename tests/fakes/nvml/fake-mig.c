/*
 * The fake NVML's NVLink and MIG entry points, which only NVIDIA's k8s-device-plugin calls
 * (NVML_API_FAKE_FUNCTIONS): no links and no MIG instances exist. A MIG-enabled GPU reports
 * 7 MIG device slots, every one empty; no GPU or compute instance handle is ever handed out.
 * Also nvmlDeviceGetAttributes_v2 (SM count and memory size). Every function holds fake.mu
 * from fake_enter() / fake_enter_dev() to fake_leave().
 */

#include <string.h>

#include "fake.h"

/* The prototypes nvml-api.h gives, so that the definitions below are checked against them. */
#define FAKE_DECLARE(sym, r, params) r sym params;
NVML_API_FAKE_FUNCTIONS(FAKE_DECLARE, NVML_OWN_TYPE)

#define ID(sym) FAKE_FN_##sym

enum nvml_return nvmlDeviceGetNvLinkState(struct nvml_device *d, unsigned link,
					  enum nvml_enable_state *active)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetNvLinkState), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(NVML_RET_NOT_SUPPORTED);
}

enum nvml_return nvmlDeviceGetNvLinkRemotePciInfo_v2(struct nvml_device *d, unsigned link,
						     struct nvml_pci_info *pci)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetNvLinkRemotePciInfo_v2), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(NVML_RET_NOT_SUPPORTED);
}

enum nvml_return nvmlDeviceGetGpuInstanceProfileInfo(struct nvml_device *d, unsigned profile,
						     struct nvml_gpu_instance_profile_info *info)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetGpuInstanceProfileInfo), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(g->mig ? NVML_RET_INVALID_ARGUMENT : NVML_RET_NOT_SUPPORTED);
}

enum nvml_return nvmlDeviceGetMaxMigDeviceCount(struct nvml_device *d, unsigned *count)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetMaxMigDeviceCount), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!count)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*count = g->mig ? 7 : 0;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetMigDeviceHandleByIndex(struct nvml_device *d, unsigned index,
						     struct nvml_device **mig)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetMigDeviceHandleByIndex), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(g->mig ? NVML_RET_NOT_FOUND : NVML_RET_INVALID_ARGUMENT);
}

enum nvml_return nvmlDeviceIsMigDeviceHandle(struct nvml_device *d, unsigned *is_mig)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceIsMigDeviceHandle), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!is_mig)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	*is_mig = 0;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetDeviceHandleFromMigDeviceHandle(struct nvml_device *mig,
							      struct nvml_device **d)
{
	struct fake_gpu *g;
	enum nvml_return r =
		fake_enter_dev(ID(nvmlDeviceGetDeviceHandleFromMigDeviceHandle), mig, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(NVML_RET_INVALID_ARGUMENT);
}

enum nvml_return nvmlDeviceGetAttributes_v2(struct nvml_device *d, struct nvml_device_attributes *a)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetAttributes_v2), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	if (!a)
		return fake_leave(NVML_RET_INVALID_ARGUMENT);
	memset(a, 0, sizeof(*a));
	a->multiprocessor_count = g->sm_count;
	a->memory_size_mb = g->mem_total >> 20;
	return fake_leave(NVML_RET_SUCCESS);
}

enum nvml_return nvmlDeviceGetGpuInstanceId(struct nvml_device *d, unsigned *id)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetGpuInstanceId), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(NVML_RET_INVALID_ARGUMENT);
}

enum nvml_return nvmlDeviceGetComputeInstanceId(struct nvml_device *d, unsigned *id)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetComputeInstanceId), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(NVML_RET_INVALID_ARGUMENT);
}

enum nvml_return nvmlDeviceGetGpuInstanceById(struct nvml_device *d, unsigned id,
					      struct nvml_gpu_instance **gi)
{
	struct fake_gpu *g;
	enum nvml_return r = fake_enter_dev(ID(nvmlDeviceGetGpuInstanceById), d, &g);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(g->mig ? NVML_RET_NOT_FOUND : NVML_RET_NOT_SUPPORTED);
}

/* No GPU instance handle is ever handed out, so every one is invalid. */
static enum nvml_return no_instance(enum fake_fn fn)
{
	enum nvml_return r = fake_enter(fn, true);

	if (r != NVML_RET_SUCCESS)
		return r;
	return fake_leave(NVML_RET_INVALID_ARGUMENT);
}

enum nvml_return nvmlGpuInstanceGetComputeInstanceById(struct nvml_gpu_instance *gi, unsigned id,
						       struct nvml_compute_instance **ci)
{
	return no_instance(ID(nvmlGpuInstanceGetComputeInstanceById));
}

enum nvml_return nvmlGpuInstanceGetInfo(struct nvml_gpu_instance *gi,
					struct nvml_gpu_instance_info *info)
{
	return no_instance(ID(nvmlGpuInstanceGetInfo));
}

enum nvml_return nvmlComputeInstanceGetInfo_v2(struct nvml_compute_instance *ci,
					       struct nvml_compute_instance_info *info)
{
	return no_instance(ID(nvmlComputeInstanceGetInfo_v2));
}

enum nvml_return
nvmlGpuInstanceGetComputeInstanceProfileInfo(struct nvml_gpu_instance *gi, unsigned profile,
					     unsigned eng_profile,
					     struct nvml_compute_instance_profile_info *info)
{
	return no_instance(ID(nvmlGpuInstanceGetComputeInstanceProfileInfo));
}
