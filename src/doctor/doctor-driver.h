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
	/* Tegra (the board itself is facts->board) */
	struct buf unreadable; /* "<path>: <why>\n" for each board file there but unreadable */
};

/* The most of one host file the driver layer reads (unit files, release files, pid files). */
#define DOCTOR_HOST_FILE_MAX ((size_t)64 * 1024)

/* Whether @path exists under the host root (links followed inside it). */
bool doctor_host_exists(const struct doctor *dr, const char *path);
/* Appends "<path>: cannot read: <why>\n" to @b for a file that is there but unreadable (@r). */
void doctor_note_unreadable(struct buf *b, const char *path, int r);
/* The lines doctor_note_unreadable() gathered in @b, each as evidence of @c; releases @b. */
void doctor_evidence_unreadable(struct doctor_check *c, struct buf *b);

/*
 * doctor-tegra.c. Before NVML: facts->board from tegra_board_read() under the host root (the
 * board's one reader, shared with the Tegra backend), and the board files that are there but
 * cannot be read noted in d->unreadable.
 */
void doctor_tegra_detect(struct doctor_driver *d);
void doctor_check_tegra(struct doctor_driver *d);	/* driver.tegra */
void doctor_check_tegra_nodes(struct doctor_driver *d); /* driver.tegra-nodes */
void doctor_check_smi(struct doctor_driver *d);		/* driver.nvidia-smi */
void doctor_check_persistence(struct doctor_driver *d); /* driver.persistence */
void doctor_check_boot(struct doctor_driver *d);	/* driver.boot */
