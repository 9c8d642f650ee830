#pragma once

/*
 * Private to src/doctor: what the run (doctor.c) hands every layer. The layers (doctor-driver.c,
 * doctor-runtime.c, doctor-plugin.c, doctor-compat.c and the files they call) record checks in
 * the report (doctor-report.h), read the host through the host-root file system
 * (doctor-hostfs.h), and read the options and the facts earlier layers learnt here. The call
 * graph inside src/doctor is one-way: run -> layers -> report, hostfs and the helpers (TOML,
 * YAML, net, image); neither the report nor the hostfs calls a layer, no layer calls the run.
 *
 * Threads: the doctor runs on the caller's thread. A check that may hang (an NVML call, a
 * socket peer) bounds itself: NVML runs on a worker joined with a deadline, a socket gets a
 * receive/send timeout; a hung peer is a failed check, never a hung doctor.
 *
 * Ownership: struct doctor owns the report, the facts and the host root; doctor_run() releases
 * them before it returns. The options are the caller's.
 */

#include <stdbool.h>

#include "config.h"
#include "doctor-hostfs.h"
#include "doctor-report.h"
#include "doctor.h"
#include "gpu.h"
#include "util.h"

struct doctor_opts {
	const char *host_root;	  /* every host path is read under it; "/" by default */
	const char *cuda_version; /* --cuda-version "12.4", or NULL */
	const char *image;	  /* --image REF, or NULL */
	bool json;		  /* --json */
	const struct config *cfg; /* the effective config (flags, environment, file) */
	unsigned timeout_ms;	  /* bound on one NVML call or socket exchange (5000) */
};

/* The GPUs the doctor lists: as many as one node is built for. */
#define DOCTOR_MAX_GPUS GPU_NODE_MAX

/*
 * What one layer learns and a later one uses. Filled by the layer that finds it; zero/empty
 * means unknown. Owned by struct doctor.
 */
struct doctor_facts {
	bool nvml_ok;			 /* NVML loaded and initialised */
	char driver_version[64];	 /* from NVML, "550.54.15" */
	char kmod_version[64];		 /* from /proc/driver/nvidia/version */
	int cuda_driver_version;	 /* NVML's, 12040 for 12.4 */
	unsigned n_gpus;		 /* GPUs NVML (or the Tegra probe) sees */
	char uuids[DOCTOR_MAX_GPUS][96]; /* their UUIDs, in NVML order */
	char names[DOCTOR_MAX_GPUS][96]; /* their product names, in NVML order */
	char product_label[96];		 /* nvidia.com/gpu.product's value (labels.c, from GPU 0) */
	/* gpumem enforcement (doctor-enforce.c): per GPU as discovery found them, in NVML order */
	enum gpu_mem_limits mem_limits[DOCTOR_MAX_GPUS];
	bool mig;		     /* a GPU has MIG enabled */
	bool integrated;	     /* a Tegra iGPU (NVML's or the Tegra probe's) */
	struct gpu_board board;	     /* a Jetson/Tegra board (tegra_board_read()); zero elsewhere */
	char runtime[16];	     /* "containerd", "docker", "" */
	char containerd_config[256]; /* host path of the containerd config found, "" none */
	char containerd_socket[256]; /* host path of the containerd socket for that layout */
	char layout[16];	     /* "kubeadm", "k3s", "microk8s", "kubeedge", "" */
	bool plugin_ready;	     /* the running daemon's /readyz said 200 */
};

/*
 * The doctor's frame. Layers use the functions (doctor_add(), doctor_read(), doctor_opts(),
 * doctor_facts(), ...), not the fields: only doctor-report.c and doctor-hostfs.c reach into
 * theirs.
 */
struct doctor {
	const struct doctor_opts *o;
	struct doctor_facts facts;
	struct doctor_report report;
	struct doctor_hostfs fs;
};

static inline const struct doctor_opts *doctor_opts(const struct doctor *dr)
{
	return dr->o;
}

static inline struct doctor_facts *doctor_facts(struct doctor *dr)
{
	return &dr->facts;
}

/* The layers, in the order doctor_run() calls them; each adds its checks. */
void doctor_driver(struct doctor *dr);	 /* doctor-driver.c */
void doctor_runtime(struct doctor *dr);	 /* doctor-runtime.c */
void doctor_plugin(struct doctor *dr);	 /* doctor-plugin.c */
void doctor_compat(struct doctor *dr);	 /* doctor-compat.c */
void doctor_backstop(struct doctor *dr); /* doctor-backstop.c: plugin.backstop */
/* plugin.gpumem-enforcement (doctor-enforce.c), in the plugin layer after doctor_plugin(). */
void doctor_enforce(struct doctor *dr);

/* Runs every layer with @o and prints the report on stdout. Returns the exit status (0 or 1). */
int doctor_run(const struct doctor_opts *o);
