#pragma once

/*
 * Private to the doctor's driver layer: doctor-driver.c (NVML, versions, /dev nodes) and
 * doctor-host.c (Tegra, nvidia-smi, persistence, start at boot, and the host-path helpers).
 * Everything runs on the doctor's thread.
 */

#include <stdbool.h>
#include <sys/stat.h>

#include "doctor-int.h"
#include "gpu.h"

/* What the driver layer's checks share; owned by doctor_driver(), released before it returns. */
struct doctor_driver {
	struct doctor *dr;
	struct doctor_facts *f;
	const struct config *cfg; /* may be NULL */
	/* NVML */
	int nvml_r;		/* 0, or -errno of open/discover */
	char *nvml_err;		/* the backend's message: what is missing and how to fix it */
	bool nvml_hung;		/* no answer within timeout_ms */
	const char *hung_stage; /* where it hangs (literals) */
	const char *hung_call;
	struct gpu_info info;
	char *lib_shown;      /* the NVML library file (host path when under the host root) */
	char lib_version[64]; /* the driver version in its name, "" unknown */
	/* /proc/driver/nvidia/version: read (0), or -errno (-ENOENT: absent); its first line */
	int kmod_r;
	char *kmod_line;
	/* Tegra */
	bool tegra;
	int l4t_major; /* 36 for "R36 (release), REVISION: 4.3"; 0 unknown */
	char soc[32];  /* "tegra234", "" unknown */
	char model[128];
	struct buf unreadable; /* "<path>: <why>\n" for each Tegra file there but unreadable */
};

/* Before NVML: fills tegra, l4t_major, soc, model and facts->tegra, facts->l4t_release. */
void doctor_tegra_detect(struct doctor_driver *d);
void doctor_check_tegra(struct doctor_driver *d);	/* driver.tegra */
void doctor_check_smi(struct doctor_driver *d);		/* driver.nvidia-smi */
void doctor_check_persistence(struct doctor_driver *d); /* driver.persistence */
void doctor_check_boot(struct doctor_driver *d);	/* driver.boot */
