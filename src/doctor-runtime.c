/* The doctor's runtime layer (doctor.h). */
#include "doctor.h"

void doctor_runtime(struct doctor *dr)
{
	(void)dr;
}
