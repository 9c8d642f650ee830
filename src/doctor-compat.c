/* The doctor's compat layer (doctor.h). */
#include "doctor.h"

void doctor_compat(struct doctor *dr)
{
	(void)dr;
}
