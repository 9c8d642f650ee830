#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "gpu-monitor.h"

int main(int argc, char **argv)
{
	int rc = cli_main(argc, argv);

	/*
	 * A thread still inside the GPU driver (a hung NVML call) cannot be joined, and the
	 * driver library's destructors may wait for it forever: leave without running them.
	 */
	if (gpu_monitor_live_threads() > 0) {
		(void)fflush(NULL);
		_exit(rc);
	}
	return rc;
}
