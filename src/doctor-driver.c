/* The doctor's driver layer (doctor.h). */
#include "doctor.h"

void doctor_driver(struct doctor *dr)
{
	(void)dr;
}
