#pragma once

/*
 * Polls the kubelet's pod-resources API (v1.PodResourcesLister/List) to learn which device IDs
 * are held by live pods. An answer is acted on only when two consecutive answers are equal, so
 * a pod caught between admission and its first listing does not flip the gpumem mask.
 * Logs (module=podres).
 */

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct loop;
struct podres;

/*
 * A stable answer: @resp/@len is the encoded ListPodResourcesResponse (valid during the call).
 */
typedef void podres_fn(struct podres *p, const uint8_t *resp, size_t len, void *userdata);

/* Polls @socket every @interval. Returns 0 or -errno. */
int podres_new(struct loop *l, const char *socket, usec_t interval, podres_fn *fn, void *userdata,
	       struct podres **ret) WARN_UNUSED;
struct podres *podres_free(struct podres *p);

/*
 * Calls @fn(resource, id, userdata) for each (resource_name, device_id) in the encoded @resp.
 * Returns 0 or -EBADMSG.
 */
int podres_for_each_device(const uint8_t *resp, size_t len,
			   void (*fn)(const char *resource, const char *id, void *userdata),
			   void *userdata);
