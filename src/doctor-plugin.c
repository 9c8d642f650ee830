/* The doctor's plugin layer (doctor.h). */
#include "doctor.h"

void doctor_plugin(struct doctor *dr)
{
	(void)dr;
}
