#pragma once

/*
 * Polls the kubelet's pod-resources API (v1.PodResourcesLister/List) to learn which device IDs
 * are held by live pods. An answer is acted on only when two consecutive answers are equal, so
 * a pod caught between admission and its first listing does not flip the gpumem mask.
 * "Equal" means: the same set of (resource_name, device_id) pairs (podres_canonical()). The
 * kubelet builds List from Go maps, so the order of pods, containers and IDs changes from one
 * call to the next, and two answers are almost never equal byte for byte.
 * Logs (module=podres).
 */

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct loop;
struct podres;

/*
 * A stable answer whose set of (resource, device ID) pairs differs from the last one handed
 * over: @resp/@len is the latest encoded ListPodResourcesResponse (valid during the call; it
 * decodes, and its pairs are the stable set, in whatever order the kubelet sent them).
 */
typedef void podres_fn(struct podres *p, const uint8_t *resp, size_t len, void *userdata);

/* Polls @socket every @interval (0: only when podres_poll_now() asks). Returns 0 or -errno. */
int podres_new(struct loop *l, const char *socket, usec_t interval, podres_fn *fn, void *userdata,
	       struct podres **ret) WARN_UNUSED;
struct podres *podres_free(struct podres *p);

/*
 * Every answer that decodes, stable or not (metrics: who holds what right now), after the
 * stable-answer callback. @resp/@len valid during the call. NULL @fn: none.
 */
void podres_on_answer(struct podres *p, podres_fn *fn, void *userdata);
/*
 * When the latest stable answer came (now_usec() clock; one equal to the answer before it,
 * handed over or not): the last one handed to the callback is still true then. 0: none yet;
 * NULL @p: 0. An owner acting late on the last answer checks it is fresh.
 */
usec_t podres_stable_at(const struct podres *p);
/* Lists now unless a call is in flight (the periodic polls go on as before). */
void podres_poll_now(struct podres *p);

/*
 * Calls @fn for each device ID in the encoded @resp with its holder: namespace, pod and
 * container names ("" when the kubelet sent none), resource name and ID. Returns 0 or
 * -EBADMSG.
 */
typedef void podres_owner_fn(const char *namespace_, const char *pod, const char *container,
			     const char *resource, const char *id, void *userdata);
int podres_for_each_owner(const uint8_t *resp, size_t len, podres_owner_fn *fn, void *userdata);
/*
 * The same walk over an answer the caller has unpacked (and keeps): the strings @fn gets point
 * into @m and live as long as it does.
 */
struct V1__ListPodResourcesResponse;
void podres_walk(const struct V1__ListPodResourcesResponse *m, podres_owner_fn *fn, void *userdata);

/*
 * The canonical form of an encoded ListPodResourcesResponse, for comparing answers: its
 * (resource_name, device_id) pairs, sorted (by resource, then ID, bytewise) and without
 * duplicates (a device on two NUMA nodes is listed twice), each written as "resource\0id\0".
 * Pods and containers are left out: which pod holds a device does not matter to the owner.
 * @ret's contents are replaced. Returns the number of pairs, -EBADMSG (not a
 * ListPodResourcesResponse) or -ENOMEM.
 */
int podres_canonical(const uint8_t *resp, size_t len, struct buf *ret) WARN_UNUSED;

/*
 * Calls @fn(resource, id, userdata) for each (resource_name, device_id) in the encoded @resp.
 * Returns 0 or -EBADMSG.
 */
int podres_for_each_device(const uint8_t *resp, size_t len,
			   void (*fn)(const char *resource, const char *id, void *userdata),
			   void *userdata);
