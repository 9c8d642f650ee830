#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "runner.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

int main(int argc, char **argv)
{
	int rc = cli_main(argc, argv);

	/*
	 * A thread still inside the GPU driver (a hung NVML call: the monitor's or the doctor's,
	 * both run through runner.h) cannot be joined, and the driver library's destructors may
	 * wait for it forever: leave without running them.
	 */
	if (runner_live() > 0) {
#if defined(__SANITIZE_ADDRESS__)
		/* _exit() skips LeakSanitizer's check at exit; what the stuck thread holds is reachable. */
		if (__lsan_do_recoverable_leak_check() != 0 && rc == 0)
			rc = 1;
#endif
		(void)fflush(NULL);
		_exit(rc);
	}
	return rc;
}
