#pragma once

/*
 * Internal state of the fake NVML library (tests/fakes/nvml). One process-wide state under
 * one mutex: the fixture's GPUs, the injected failures, the call counters and the event
 * sets. The exported NVML functions (fake-api.c and the files beside it) and the control
 * socket thread (fake-control.c) both work on it with fake.mu held.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvml-api.h"

#define FAKE_MAX_GPUS	16
#define FAKE_MAX_SETS	16
#define FAKE_MAX_PROCS	128
#define FAKE_GEN_SLOTS	4
#define FAKE_MAX_LIMITS 16 /* cgroups with memory limits, per GPU */
#define FAKE_LIMIT_PATH 256

_Static_assert(FAKE_MAX_GPUS <= 32, "blocked_gpus holds a bit per GPU");

/* One id per exported function, for counters, failure injection and NOT_SUPPORTED. */
#define FAKE_FN_ID(sym, r, params) FAKE_FN_##sym,
enum fake_fn {
	NVML_API_FUNCTIONS(FAKE_FN_ID, NVML_OWN_TYPE)
	NVML_API_FAKE_FUNCTIONS(FAKE_FN_ID, NVML_OWN_TYPE) FAKE_FN_COUNT,
};
#define FAKE_FN_WORDS ((FAKE_FN_COUNT + 63) / 64)

struct fake_proc {
	unsigned pid;
	unsigned long long used;
};

/* A process's SM share, as nvmlDeviceGetProcessUtilization samples it. */
struct fake_proc_util {
	unsigned pid;
	unsigned sm_util; /* percent */
};

/* One cgroup's limits as nvmlDeviceSetMemoryLimits_v1 left them. */
struct fake_limit {
	char path[FAKE_LIMIT_PATH];
	unsigned long long soft, hard, used;
};

/*
 * GPM and PCIe throughput (fake-gpm.c): whether the GPU has GPM, the percentages and MiB/s
 * nvmlGpmMetricsGet answers for any interval, and the KB/s nvmlDeviceGetPcieThroughput does.
 */
struct fake_gpm {
	bool on;
	double graphics, tensor, dram; /* percent */
	double pcie_tx, pcie_rx;       /* MiB/s */
	unsigned tput_tx, tput_rx;     /* KB/s, nvmlDeviceGetPcieThroughput */
};

struct fake_gpu {
	char name[NVML_BUF_NAME_V2];
	char uuid[NVML_BUF_UUID_V2];
	char pci_bus_id[NVML_BUF_PCI_BUS_ID];
	unsigned minor;
	unsigned pci_device_id, pci_subsystem_id;
	unsigned long long mem_total, mem_used;
	unsigned temp, temp_slowdown, temp_shutdown, temp_gpu_max;
	unsigned power_mw, power_limit_mw;
	unsigned util_gpu, util_mem;
	unsigned clock_graphics, clock_sm, clock_mem, clock_video;
	unsigned sm_count;
	bool ecc;
	unsigned long long ecc_corrected, ecc_uncorrected;
	unsigned long long energy_mj, clock_reasons;
	bool events_set; /* false: derived from ecc */
	unsigned long long events;
	int cc_major, cc_minor;
	unsigned arch;
	bool mig;
	/* nvmlDeviceGetMigMode answers (SUCCESS) rather than NOT_SUPPORTED; mig = on implies it */
	bool mig_capable;
	unsigned pci_class; /* 24-bit PCI class: nvmlDeviceGetPciInfoExt's base/sub class */
	bool pci_class_set; /* the fixture named it: also written to the fake sysfs */
	char numa[16];	    /* written to the fake sysfs; "" = no file */
	unsigned n_procs;
	struct fake_proc procs[FAKE_MAX_PROCS];
	int topo[FAKE_MAX_GPUS]; /* common ancestor level with GPU j, -1 = default */
	bool lost;
	/* "memory_limits = supported": the CUDA 13.4 per-cgroup limits (default not_supported) */
	bool mem_limits;
	/* "process_sm_util": nvmlDeviceGetProcessUtilization answers (else NOT_SUPPORTED) */
	bool proc_util;
	unsigned n_proc_utils;
	struct fake_proc_util proc_utils[FAKE_MAX_PROCS];
	unsigned n_limits;
	struct fake_limit limits[FAKE_MAX_LIMITS];
	uint64_t not_supported[FAKE_FN_WORDS];
	struct fake_gpm gpm;
	/* DCGM-exporter's other counters (fake-counters.c) */
	unsigned long long mem_reserved;    /* "memory_reserved": v2's reserved, out of v1's free */
	int mem_temp;			    /* "memory_temperature", C; -1: field NOT_SUPPORTED */
	enum nvml_value_type mem_temp_type; /* "memory_temperature_type": how the field answers */
	unsigned pcie_replay, enc_util, dec_util;
	bool remap; /* "remapped_rows" given; else NOT_SUPPORTED */
	unsigned remap_corr, remap_unc, remap_pending, remap_failure;
	unsigned nvlinks;			 /* "nvlink = LINKS:TX:RX"; 0: no NVLink */
	unsigned long long nvlink_tx, nvlink_rx; /* KiB per link */
	int nvlink_err_link;			 /* "nvlink_link_error = LINK:CODE"; -1: none */
	enum nvml_return nvlink_err;		 /* what that link's throughput fields answer */
};

struct fake_fail {
	bool active;
	enum nvml_return code;
	uint64_t nth; /* 0: every call; else the nth call after the rule was set */
	uint64_t seen;
};

/* The fixture: what a file describes. */
struct fake_fixture {
	char driver_version[NVML_BUF_DRIVER_VERSION];
	char nvml_version[NVML_BUF_NVML_VERSION];
	char kernel_version[NVML_BUF_DRIVER_VERSION];
	int cuda_version;
	enum nvml_return init_error;
	bool mismatch;
	uint64_t not_supported[FAKE_FN_WORDS];
	/* "block = FUNC,...": blocked from the moment the library loads (as "block FUNC") */
	uint64_t block[FAKE_FN_WORDS];
	struct fake_fail fail[FAKE_FN_COUNT];
	unsigned n_gpus;
	struct fake_gpu gpus[FAKE_MAX_GPUS];
};

struct fake_event {
	unsigned gpu;
	unsigned long long type, data;
};

struct fake_set {
	bool used;
	unsigned gen;
	/* threads inside nvmlEventSetWait_v2 on this set (blocked there or waiting for events):
	   nvmlEventSetFree then is a use after free in a real driver, and the fake aborts */
	unsigned inside;
	unsigned long long mask[FAKE_MAX_GPUS];
	bool lost_pending;
	struct fake_event *q;
	size_t head, len, cap;
};

struct fake_handle {
	unsigned magic;
	unsigned gpu;
	unsigned gen;
};

struct fake_state {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast on every change a waiter cares about */
	struct fake_fixture fx;
	char fixture_error[256]; /* non-empty: the fixture did not load; nvmlInit fails */
	bool stale;		 /* driver reloaded: everything UNINITIALIZED until nvmlInit */
	unsigned gen;		 /* handle generation, bumped by reload */
	int init_count;
	unsigned waiters; /* threads blocked in nvmlEventSetWait_v2 */
	uint64_t counts[FAKE_FN_COUNT];
	/* "block FUNC": callers of FUNC wait in enter_locked() until "release FUNC" (a hung driver) */
	uint64_t blocked[FAKE_FN_WORDS];
	/* "block FUNC GPU": the same for calls about one GPU only (bit = NVML index) */
	uint32_t blocked_gpus[FAKE_FN_COUNT];
	unsigned blocked_in[FAKE_FN_COUNT]; /* threads waiting there now */
	struct fake_set sets[FAKE_MAX_SETS];
	struct fake_handle handles[FAKE_GEN_SLOTS][FAKE_MAX_GPUS];
};

extern struct fake_state fake;
extern const char *const fake_fn_names[FAKE_FN_COUNT];

/* Function id by name, or -1. */
int fake_fn_lookup(const char *name);
/* Return code by name ("GPU_IS_LOST", "NVML_ERROR_GPU_IS_LOST", "SUCCESS") or number; -1 if bad. */
int fake_code_lookup(const char *s);
const char *fake_error_string(enum nvml_return r);

/* Fixture file: returns 0, or -1 with a message in @err. */
int fake_fixture_load(const char *path, struct fake_fixture *fx, char *err, size_t errlen);
/* "00000000:01:00.0" -> domain, bus, device, function; returns 0 or -1. */
int fake_parse_bus_id(const char *s, unsigned v[4]);
void fake_fixture_defaults(struct fake_fixture *fx);
/* One key of a GPU section / of the global part; 0 or -1 with a message. */
int fake_gpu_set(struct fake_gpu *g, unsigned index, const char *key, const char *value, char *err,
		 size_t errlen);
int fake_global_set(struct fake_fixture *fx, const char *key, const char *value, char *err,
		    size_t errlen);
void fake_gpu_defaults(struct fake_gpu *g, unsigned index);
/* "00000000:01:00.0" -> "0000:01:00.0" (sysfs form); returns 0 or -1. */
int fake_sysfs_bus_id(const char *bus_id, char *out, size_t outlen);

/* A number with an optional KiB/MiB/GiB suffix (fake-fixture.c); 0 or -1. */
int fake_parse_ull(const char *s, unsigned long long *ret);
/* The counters' GPU keys (fake-counters.c): 1 taken, 0 not one of them, -1 a bad value. */
int fake_counters_set(struct fake_gpu *g, const char *key, const char *value);
void fake_counters_defaults(struct fake_gpu *g);

/* Queues an event for @gpu on every set that registered @type for it; returns how many. With fake.mu held. */
unsigned fake_deliver(unsigned gpu, unsigned long long type, unsigned long long data);

/*
 * For the exported functions kept in other files (fake-telemetry.c, fake-counters.c, fake-gpm.c,
 * fake-limits.c, fake-mig.c): fake-api.c's entry rules.
 * fake_enter() locks and counts (@need_init: fail UNINITIALIZED without nvmlInit); fake_enter_dev()
 * also resolves @d. Each returns SUCCESS with fake.mu held, or the error with it released;
 * fake_leave() unlocks and returns @r.
 */
enum nvml_return fake_enter(enum fake_fn fn, bool need_init);
enum nvml_return fake_enter_dev(enum fake_fn fn, struct nvml_device *d, struct fake_gpu **ret);
enum nvml_return fake_leave(enum nvml_return r);

/* A GPM fixture key of a GPU (fake-gpm.c): 1 taken, 0 not a GPM key, -1 bad (message in @err). */
int fake_gpm_set(struct fake_gpu *g, const char *key, const char *value, char *err, size_t errlen);
/* GPM samples allocated and not freed (the control command "gpm_samples"). With fake.mu held. */
unsigned fake_gpm_samples(void);

/* Control socket (fake-control.c). */
int fake_control_start(const char *path);
void fake_control_stop(void);
