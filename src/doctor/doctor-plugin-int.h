#pragma once

/*
 * Shared by the doctor's device-plugin layer: doctor-plugin.c (directory, kubelet socket,
 * plugin sockets, /readyz) and doctor-alloc.c (allocations from the pod-resources API).
 * Caller's thread; everything here is owned by doctor_plugin()'s frame.
 */

#include <stdbool.h>
#include <stddef.h>

struct doctor;

/* A resource this config can advertise, and what the socket check learnt about it. */
struct doctor_resource {
	const char *name; /* points into the config, or CONFIG_DEFAULT_RESOURCE */
	bool required;	  /* the config serves it on any node with GPUs */
	bool socket_seen; /* its socket file is in the device-plugins directory */
};

/*
 * Adds plugin.allocations: asks the kubelet's pod-resources socket (@host_path, as on the
 * host, shown in the evidence; @dial, the path that reaches it inside the host root, from
 * doctor_socket(), or NULL when it was not found there: @open_r is then why) for
 * GetAllocatableResources and List, and counts allocatable, allocated and free devices of
 * each of the @n resources in @res, with their holders. @missing_default (or NULL) is the
 * configured socket, when it was missing and MicroK8s's is used instead.
 */
void doctor_plugin_allocations(struct doctor *dr, const char *host_path, const char *dial,
			       int open_r, const char *missing_default,
			       const struct doctor_resource *res, size_t n);

/* The fix shown when a socket refuses us for lack of permission (doctor-alloc.c). */
extern const char doctor_plugin_fix_root[];
