/*
 * Which GPU of the limits file a CUDA device or an NVML handle is. By the device's own UUID
 * (the real cuDeviceGetUuid / nvmlDeviceGetUUID), so a CUDA_VISIBLE_DEVICES subset or reorder
 * maps right by construction: ordinal 0 is whichever GPU the driver shows first. With one GPU
 * in the limits file and one device visible, that device, whatever its ID says (a Jetson
 * iGPU's UUID is not one NVML knows). Answers are cached per ordinal; a device without a limit
 * is said once on stderr and passes through.
 */

#include <stdio.h>
#include <strings.h>

#include "glibc-floor.h"
#include "ipz-int.h"

#define DEV_MAX 64 /* ordinals cached; a higher one is looked up each time */

/* limits index + 1 per ordinal; 0: not looked up yet. Races only repeat a lookup. */
static int dev_cache[DEV_MAX];

static void uuid_format(const struct cu_uuid *u, char *buf, size_t size)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	(void)snprintf(buf, size,
		       "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		       b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		       b[12], b[13], b[14], b[15]);
}

static int gpu_by_uuid(const char *uuid)
{
	unsigned i;

	for (i = 0; i < ipz.limits.n_gpus; i++)
		if (strcasecmp(ipz.limits.gpus[i].uuid, uuid) == 0)
			return (int)i;
	return -1;
}

/* One GPU in the file and one device visible: that device. */
static bool single_device(void)
{
	int n = 0;

	return ipz.limits.n_gpus == 1 && ipz_real.cuDeviceGetCount &&
	       ipz_real.cuDeviceGetCount(&n) == CU_RES_SUCCESS && n == 1;
}

static int lookup(cu_device dev)
{
	cu_fn_cuDeviceGetUuid *get = ipz_real.cuDeviceGetUuid_v2 ? ipz_real.cuDeviceGetUuid_v2 :
								   ipz_real.cuDeviceGetUuid;
	struct cu_uuid u;
	char buf[48];
	int gpu = -1;

	if (get && get(&u, dev) == CU_RES_SUCCESS) {
		uuid_format(&u, buf, sizeof(buf));
		gpu = gpu_by_uuid(buf);
	}
	if (gpu < 0 && single_device())
		gpu = 0;
	if (gpu < 0)
		IPZ_SAY_ONCE("a CUDA device is not in " IPZ_DIR
			     "/limits: its memory is not limited");
	return gpu;
}

int ipz_dev_gpu(cu_device dev)
{
	int v;

	if (!ipz.enforcing)
		return -1;
	if (dev < 0 || dev >= DEV_MAX)
		return lookup(dev);
	v = __atomic_load_n(&dev_cache[dev], __ATOMIC_RELAXED);
	if (IPZ_LIKELY(v != 0))
		return v - 1;
	v = lookup(dev);
	__atomic_store_n(&dev_cache[dev], v + 1, __ATOMIC_RELAXED);
	return v;
}

int ipz_dev_current(cu_device *ret_dev, enum cu_result *reterr)
{
	cu_device dev = 0;
	enum cu_result r;

	if (!ipz_real.cuCtxGetDevice) {
		*reterr = CU_RES_NOT_FOUND;
		return IPZ_DEV_ERROR;
	}
	r = ipz_real.cuCtxGetDevice(&dev);
	if (r != CU_RES_SUCCESS) {
		*reterr = r;
		return IPZ_DEV_ERROR;
	}
	*ret_dev = dev;
	return ipz_dev_gpu(dev);
}

int ipz_dev_of_gpu(unsigned gpu)
{
	int n = 0, i;

	if (!ipz_real.cuDeviceGetCount || ipz_real.cuDeviceGetCount(&n) != CU_RES_SUCCESS)
		return -1;
	for (i = 0; i < n; i++)
		if (ipz_dev_gpu(i) == (int)gpu)
			return i;
	return -1;
}

bool ipz_dev_integrated(cu_device dev)
{
	int v = 0;

	return ipz_real.cuDeviceGetAttribute &&
	       ipz_real.cuDeviceGetAttribute(&v, IPZ_CU_ATTR_INTEGRATED, dev) == CU_RES_SUCCESS &&
	       v != 0;
}

int ipz_dev_gpu_nvml(struct ipz_nvml_device *d)
{
	char buf[IPZ_NVML_UUID_BUFFER_SIZE];
	int gpu = -1;

	if (!ipz.enforcing)
		return -1;
	if (ipz_real.nvmlDeviceGetUUID &&
	    ipz_real.nvmlDeviceGetUUID(d, buf, sizeof(buf)) == IPZ_NVML_SUCCESS) {
		buf[sizeof(buf) - 1] = '\0';
		gpu = gpu_by_uuid(buf);
	}
	return gpu;
}
