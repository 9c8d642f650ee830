#include "unit-podres.h"

#include "podresources.pb-c.h"
#include "unit.h"

size_t unit_podres_answer(const char *res, char **ids, size_t n, uint8_t *out, size_t max)
{
	V1__ListPodResourcesResponse m = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
	V1__PodResources pod = V1__POD_RESOURCES__INIT, *pp = &pod;
	V1__ContainerResources cr = V1__CONTAINER_RESOURCES__INIT, *crp = &cr;
	V1__ContainerDevices cd = V1__CONTAINER_DEVICES__INIT, *cdp = &cd;

	cd.resource_name = (char *)res;
	cd.device_ids = ids;
	cd.n_device_ids = n;
	cr.name = (char *)"c";
	cr.devices = &cdp;
	cr.n_devices = 1;
	pod.name = (char *)"pod";
	pod.namespace_ = (char *)"default";
	pod.containers = &crp;
	pod.n_containers = 1;
	m.pod_resources = &pp;
	m.n_pod_resources = 1;
	assert_true(v1__list_pod_resources_response__get_packed_size(&m) <= max);
	return v1__list_pod_resources_response__pack(&m, out);
}
