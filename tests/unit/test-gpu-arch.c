/*
 * gpu-arch: every row of the compute capability table in each vocabulary (GFD's label value,
 * nvidia-smi's name, ours), Jetson Thor (11.0) among them; the edges of each row; unknown,
 * future and hostile capabilities; out-of-range enum values.
 */

#include <limits.h>
#include <string.h>

#include "gpu-arch.h"
#include "unit.h"
#include "util.h"

static const struct {
	int major, minor;
	enum gpu_arch arch;
	const char *gfd, *smi, *log;
} table[] = {
	{ 1, 0, GPU_ARCH_TESLA, "tesla", "Tesla", "tesla" },
	{ 1, 3, GPU_ARCH_TESLA, "tesla", "Tesla", "tesla" },
	{ 2, 1, GPU_ARCH_FERMI, "fermi", "Fermi", "fermi" },
	{ 3, 0, GPU_ARCH_KEPLER, "kepler", "Kepler", "kepler" },
	{ 3, 7, GPU_ARCH_KEPLER, "kepler", "Kepler", "kepler" },
	{ 5, 0, GPU_ARCH_MAXWELL, "maxwell", "Maxwell", "maxwell" },
	{ 5, 3, GPU_ARCH_MAXWELL, "maxwell", "Maxwell", "maxwell" },
	{ 6, 0, GPU_ARCH_PASCAL, "pascal", "Pascal", "pascal" },
	{ 6, 2, GPU_ARCH_PASCAL, "pascal", "Pascal", "pascal" },
	{ 7, 0, GPU_ARCH_VOLTA, "volta", "Volta", "volta" },
	{ 7, 2, GPU_ARCH_VOLTA, "volta", "Volta", "volta" }, /* Xavier */
	{ 7, 4, GPU_ARCH_VOLTA, "volta", "Volta", "volta" },
	{ 7, 5, GPU_ARCH_TURING, "turing", "Turing", "turing" },
	{ 8, 0, GPU_ARCH_AMPERE, "ampere", "Ampere", "ampere" },
	{ 8, 6, GPU_ARCH_AMPERE, "ampere", "Ampere", "ampere" },
	{ 8, 7, GPU_ARCH_AMPERE, "ampere", "Ampere", "ampere" }, /* Orin */
	{ 8, 8, GPU_ARCH_AMPERE, "ampere", "Ampere", "ampere" },
	{ 8, 9, GPU_ARCH_ADA, "ada-lovelace", "Ada Lovelace", "ada-lovelace" },
	{ 9, 0, GPU_ARCH_HOPPER, "hopper", "Hopper", "hopper" },
	{ 10, 0, GPU_ARCH_BLACKWELL, "blackwell", "Blackwell", "blackwell" },
	{ 10, 3, GPU_ARCH_BLACKWELL, "blackwell", "Blackwell", "blackwell" },
	/* Jetson Thor: GFD says undefined; we say blackwell everywhere (gpu-arch.c). */
	{ 11, 0, GPU_ARCH_BLACKWELL, "blackwell", "Blackwell", "blackwell" },
	{ 12, 0, GPU_ARCH_BLACKWELL, "blackwell", "Blackwell", "blackwell" },
	{ 12, 1, GPU_ARCH_BLACKWELL, "blackwell", "Blackwell", "blackwell" }, /* GB10 */
	{ 13, 0, GPU_ARCH_RUBIN, "rubin", "Rubin", "rubin" },
	/* Unknown: a gap, the future, nothing, hostile values. */
	{ 4, 0, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ 14, 0, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ 99, 9, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ 0, 0, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ -1, 0, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ 8, -1, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ 8, 100, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ INT_MIN, INT_MIN, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
	{ INT_MAX, INT_MAX, GPU_ARCH_UNKNOWN, "undefined", "Unknown", "unknown" },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(table); i++) {
		enum gpu_arch a = gpu_arch_from_cc(table[i].major, table[i].minor);

		print_message("%d.%d\n", table[i].major, table[i].minor);
		assert_int_equal(a, table[i].arch);
		assert_string_equal(gpu_arch_gfd_family(a), table[i].gfd);
		assert_string_equal(gpu_arch_smi_name(a), table[i].smi);
		assert_string_equal(gpu_arch_log_name(a), table[i].log);
	}
}

/* Every architecture has a name in each vocabulary, and no two share one. */
static void test_names_complete(void **state)
{
	(void)state;
	for (int a = 0; a < GPU_ARCH_COUNT; a++) {
		assert_non_null(gpu_arch_gfd_family((enum gpu_arch)a));
		assert_non_null(gpu_arch_smi_name((enum gpu_arch)a));
		assert_non_null(gpu_arch_log_name((enum gpu_arch)a));
		for (int b = 0; b < a; b++) {
			assert_string_not_equal(gpu_arch_gfd_family((enum gpu_arch)a),
						gpu_arch_gfd_family((enum gpu_arch)b));
			assert_string_not_equal(gpu_arch_smi_name((enum gpu_arch)a),
						gpu_arch_smi_name((enum gpu_arch)b));
			assert_string_not_equal(gpu_arch_log_name((enum gpu_arch)a),
						gpu_arch_log_name((enum gpu_arch)b));
		}
	}
}

/* An enum value from outside (a cast, memory gone bad) reads as unknown, never past the table. */
static void test_out_of_range(void **state)
{
	static const int bad[] = { GPU_ARCH_COUNT, GPU_ARCH_COUNT + 1, -1, INT_MAX, INT_MIN };

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		enum gpu_arch a = (enum gpu_arch)bad[i];

		assert_string_equal(gpu_arch_gfd_family(a), "undefined");
		assert_string_equal(gpu_arch_smi_name(a), "Unknown");
		assert_string_equal(gpu_arch_log_name(a), "unknown");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_names_complete),
		cmocka_unit_test(test_out_of_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
