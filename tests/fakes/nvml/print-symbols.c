/* Prints every NVML function nvml-api.h declares, one per line (for check-symbols). */

#include <stdio.h>

#include "nvml-api.h"

#define PRINT_NAME(sym, r, params) (void)puts(#sym);

int main(void)
{
	NVML_API_FUNCTIONS(PRINT_NAME, NVML_OWN_TYPE)
	NVML_API_FAKE_FUNCTIONS(PRINT_NAME, NVML_OWN_TYPE)
	return 0;
}
